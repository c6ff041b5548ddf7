"""Result tables: their Arrow schemas, atomic files, and the allocator reports."""
