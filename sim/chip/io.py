"""Inter-chip network interface (IO) unit: where a chip of a system meets the chip network.

A message a unit sends to a unit of another chip (a negative id, messages.remote_unit)
crosses this chip's NoC to the IO unit of the network dimension its route leaves by; once
all its packets are in, the IO unit hands it to the inter-chip network (sim/system/). A
message arriving from another chip is put on the NoC by the IO unit of the dimension it
came in by, as soon as its tail has arrived (store and forward at the chip's edge), to the
unit it is for.

Unit ids are translated at the edge, like addresses at a network card: a message leaving
names its sender and the MU its reference points to as units of this chip
(``remote_unit``); arriving, a reference to an MU of this chip becomes the local id again.
So a unit replies to a remote sender, and uses a remote MU's reference, exactly as it does
on its own chip.
"""

from __future__ import annotations

from sim.chip.messages import Message, remote_unit, split_remote
from sim.chip.units import Unit


class IoUnit(Unit):
    def __init__(self, uid: int, tile: int, shard):
        super().__init__(uid, tile, shard)
        self.bytes_out = 0  # data bytes handed to the chip network
        self.bytes_in = 0  # data bytes that came from it

    def on_message(self, msg: Message) -> None:
        """A message for another chip has crossed the NoC to here: off the chip it goes."""
        if msg.chip < 0:
            raise RuntimeError(f"IO unit {self.uid} got a {msg.kind} message for this chip's unit {msg.dst}")
        self.bytes_out += msg.nbytes
        chip = self.shard.chip_id
        if msg.src >= 0:
            msg.src = remote_unit(chip, msg.src)
        if msg.mu >= 0:
            msg.mu = remote_unit(chip, msg.mu)
        self.shard.leave_chip(msg)

    def arrive(self, msg: Message) -> None:
        """A message from another chip: over the NoC to its unit."""
        self.bytes_in += msg.nbytes
        mu = msg.mu
        if mu < 0 and split_remote(mu)[0] == self.shard.chip_id:
            mu = split_remote(mu)[1]
        self.send(msg.kind, msg.dst, src=msg.src, nbytes=msg.nbytes, mu=mu, buf=msg.buf, alloc=msg.alloc,
                  arg=msg.arg, tag=msg.tag, status=msg.status, flags=msg.flags)
