"""Messages between units, and how many packets and flits each one takes.

A message is a header plus kind-specific fields plus any data. Its size in bits is
``header_bits + fields + 8 * data bytes``; messages carrying more than
``max_packet_bytes`` of data are cut into packets of at most that much data, each with
its own header; a packet's flit count is ``ceil(bits / flit_bits)``. A reference is
(MU id, buffer id, virtual block + offset): 6 + 16 + 16 bits on Plasticine (the seed
proposal's widths); under partial-free a reference also carries its weight.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = (
    "read_request", "read_response", "write", "append", "allocate", "free", "truncate",
    "ref_inc", "ref_dec", "ack", "weight_return", "weight_request", "reference", "control",
)
(READ_REQ, READ_RESP, WRITE, APPEND, ALLOC, FREE, TRUNCATE,
 REF_INC, REF_DEC, ACK, WEIGHT_RETURN, WEIGHT_REQ, REFERENCE, CONTROL) = range(len(KINDS))
# messages whose only purpose is to keep reference counts or weights consistent
SYNC_KINDS = frozenset({REF_INC, ACK, WEIGHT_REQ})

# control opcodes (CONTROL messages: ``arg`` = opcode, ``buf`` = subject, ``nbytes`` = value)
CTRL_STREAM, CTRL_ADMIT, CTRL_STEP, CTRL_EXPERT, CTRL_LOAD, CTRL_PARTITION = 1, 2, 3, 4, 5, 6
# decode under memory.on_oom = "preempt": free or swap out a sequence; go on with a step that ran out of memory
CTRL_PREEMPT, CTRL_RESUME = 7, 8
# (a CTRL_ADMIT's ``status`` is the prefix blocks whose references the scheduler shares with the worker:
# sim/serving/prefix_sharing.py)
# between MUs under memory.spill (sim/chip/spill.py): ask for blocks; tell an MU that room was freed;
# give back the blocks of an allocation that did not find all it needed
CTRL_SPILL, CTRL_ROOM, CTRL_RETURN = 9, 10, 11
# to a memory tier's controller (sim/chip/tier_controller.py): allocate a region of ``nbytes`` (the reply's
# ``buf`` names it), grow region ``buf`` by ``nbytes``, free region ``buf``; copy ``nbytes`` to the
# tier whose controller is unit ``buf`` (a model switch: DDR to HBM)
CTRL_TIER_ALLOC, CTRL_TIER_GROW, CTRL_TIER_FREE, CTRL_COPY = 12, 13, 14, 15

# message flags
STREAM = 1  # a tile buffer: allocate its room once; writes advance its stream position; a read waits for ``arg``
POSTED = 2  # data a CU pushes to a CU that posted a receive for ``tag`` (a collective's step): taken as a reply
FLOW = 4  # its data moved as a flow (to or from a memory tier, sim/flows): its packets carry the header only
# status a worker reports to its scheduler (in an acknowledgement's ``arg``)
RUNNING, FINISHED, FAILED = 0, 1, 2
# ... under memory.on_oom = "preempt": a step could not grow a buffer; the sequence is preempted (its KV
# freed or in DRAM); an admission found no room
BLOCKED, PREEMPTED, NO_ROOM = 3, 4, 5

# A unit of another chip of a system is named by a negative id (its chip and its unit id there):
# a unit sends to it like to any other; the IO units translate ids at the chip's edge
# (sim/chip/io.py), so replies to a remote sender find their way back.
_UNIT_BITS = 24


def remote_unit(chip: int, uid: int) -> int:
    """The id of unit ``uid`` of chip ``chip`` as units of other chips name it."""
    return -((chip << _UNIT_BITS) | uid) - 1


def split_remote(ref: int) -> tuple[int, int]:
    """(chip, unit id) of a remote unit id."""
    v = -ref - 1
    return v >> _UNIT_BITS, v & ((1 << _UNIT_BITS) - 1)


LENGTH_BITS = 32  # a byte count or a token count in a message
STATUS_OK, STATUS_FAILED = 0, 1
STATUS_NO_ROOM = 2  # memory.on_oom = "preempt": refused for lack of memory (the requester may try again)

# Message fields, in wire order (all int64). ``alloc`` is the oracle's shadow id of the
# allocation a reference points to: simulator bookkeeping, never counted in flits.
FIELDS = ("msg", "kind", "src", "dst", "mu", "buf", "alloc", "nbytes", "arg", "tag", "status", "sent", "packets",
          "flags", "chip")


@dataclass(slots=True)
class Message:
    msg: int  # unique id: src unit * 2**32 + the sender's message count
    kind: int
    src: int  # unit ids
    dst: int
    mu: int = -1  # unit id of the MU a reference points to
    buf: int = -1  # MU-local buffer id the message refers to
    alloc: int = -1  # shadow allocation id (oracle)
    nbytes: int = 0  # data carried (write, append, read response) or asked for (read, allocate)
    arg: int = 0  # kind-specific: weight, control opcode, length to keep (truncate)
    tag: int = 0  # request tag the reply must carry
    status: int = STATUS_OK
    sent: int = 0  # cycle the sender queued it
    packets: int = 1
    flags: int = 0  # STREAM: tile-buffer semantics (allocate, write, read); POSTED: a pushed reply
    chip: int = -1  # the chip ``dst`` is on when it is another chip of a system (-1: this chip)

    def row(self) -> tuple:
        return (self.msg, self.kind, self.src, self.dst, self.mu, self.buf, self.alloc, self.nbytes, self.arg,
                self.tag, self.status, self.sent, self.packets, self.flags, self.chip)


@dataclass(frozen=True)
class Sizing:
    """Bit widths that decide flit counts."""

    flit_bits: int = 512
    header_bits: int = 64
    max_packet_bytes: int = 2048
    mu_id_bits: int = 6
    buffer_id_bits: int = 16
    offset_bits: int = 16
    weight_bits: int = 0  # 0 unless the reclamation protocol is partial-free

    @property
    def ref_bits(self) -> int:
        return self.mu_id_bits + self.buffer_id_bits + self.offset_bits + self.weight_bits

    def field_bits(self, kind: int) -> int:
        """Bits beyond the header and the data."""
        ref = self.ref_bits
        if kind in (READ_REQ, TRUNCATE):
            return ref + LENGTH_BITS
        if kind in (WRITE, APPEND, FREE, REF_INC, REF_DEC, WEIGHT_REQ, REFERENCE, WEIGHT_RETURN, ACK):
            return ref
        if kind in (ALLOC, CONTROL):
            return LENGTH_BITS
        return 0  # read response: the tag in the header identifies it

    def packet_flits(self, kind: int, data_bytes: int) -> list[int]:
        """Flits of each packet of a message carrying ``data_bytes`` of data."""
        per = self.max_packet_bytes
        fixed = self.header_bits + self.field_bits(kind)
        fb = self.flit_bits
        if data_bytes <= per:
            return [-(-(fixed + 8 * data_bytes) // fb)]
        full, rest = divmod(data_bytes, per)
        out = [-(-(fixed + 8 * per) // fb)] * full
        if rest:
            out.append(-(-(fixed + 8 * rest) // fb))
        return out

    def link_data_rate(self) -> float:
        """Data bytes per cycle a link (one flit a cycle) carries in full packets: a flow through
        a link is never faster than the packets it stands for."""
        return self.max_packet_bytes / self.packet_flits(READ_RESP, self.max_packet_bytes)[0]

    def chunk_ready(self, first: int, data_bytes: int, bytes_per_cycle: int) -> list[int]:
        """Cycle each packet of a ``data_bytes`` transfer is ready when the port streams it at
        ``bytes_per_cycle`` from cycle ``first`` on (a packet leaves once its last byte is read)."""
        ready, done = [], 0
        for c in self.chunk_bytes(data_bytes):
            done += c
            ready.append(first + -(-done // bytes_per_cycle))
        return ready

    def chunk_bytes(self, data_bytes: int) -> list[int]:
        """Data bytes in each packet (as packet_flits cuts them)."""
        per = self.max_packet_bytes
        if data_bytes <= per:
            return [data_bytes]
        full, rest = divmod(data_bytes, per)
        return [per] * full + ([rest] if rest else [])
