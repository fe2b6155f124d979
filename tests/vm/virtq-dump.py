#!/usr/bin/python3
"""Dump what qemu knows of a VM's virtio-net queues through its HMP monitor.

Usage: virtq-dump.py MONITOR_SOCKET [ROUNDS]

vmrun.sh calls it when a guest's NIC watch (guest-lib.sh,
kcoll_nic_watch) reports that eth0 stopped transmitting: the device's
status, then for the receive (0) and transmit (1) queues qemu's indices
(last_avail_idx: the next descriptor qemu will take; shadow_avail_idx:
the guest's avail index as qemu last read it; used_idx: what qemu
completed; signalled_used: the used index of qemu's last interrupt) and,
read straight from guest memory, the rings' own avail and used indices
and their event-index fields. ROUNDS (default 2) repeats the queue dumps
a second apart, to show whether anything still moves; then it takes the
link down and up (set_link) and dumps the queues once more.

What the figures tell apart: qemu has descriptors it never took
(avail idx in memory ahead of last_avail_idx: a kick qemu missed or a
backend that holds the queue); qemu completed everything but the guest
did not reap it (used idx ahead of what the guest has, signalled_used
behind used_idx: an interrupt not sent, or sent and lost).
"""
import re
import socket
import sys
import time

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[c=>]")
PATH = "/machine/peripheral/nic0/virtio-backend"


class Monitor:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(5)
        self.s.connect(path)
        self.read_prompt()

    def read_prompt(self):
        buf = b""
        while not buf.rstrip().endswith(b"(qemu)"):
            chunk = self.s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf

    def cmd(self, line):
        self.s.sendall(line.encode() + b"\n")
        out = ANSI.sub(b"", self.read_prompt()).replace(b"\r", b"")
        lines = out.decode(errors="replace").split("\n")
        # The echo of the command, then its output, then the prompt.
        body = [l for l in lines[1:] if l.strip() != "(qemu)"]
        return "\n".join(body).rstrip()


def field(text, name):
    m = re.search(r"^\s*%s:\s*(\S+)" % re.escape(name), text, re.M)
    return m.group(1) if m else None


def u16(mon, addr):
    out = mon.cmd("xp /1hx 0x%x" % addr)
    m = re.search(r":\s*0x([0-9a-fA-F]+)", out)
    return int(m.group(1), 16) if m else None


def queue(mon, q):
    st = mon.cmd("info virtio-queue-status %s %d" % (PATH, q))
    print(st)
    num, avail, used = (field(st, k) for k in ("num", "avail", "used"))
    if not (num and avail and used):
        return
    num, avail, used = int(num), int(avail, 16), int(used, 16)
    if not avail or not used:
        return
    # struct vring_avail { u16 flags, idx, ring[num], used_event }
    # struct vring_used { u16 flags, idx; elem[num] of 8 bytes; u16 avail_event }
    print("  in guest memory: avail.flags %s avail.idx %s used_event %s"
          " | used.flags %s used.idx %s avail_event %s" % (
              u16(mon, avail), u16(mon, avail + 2), u16(mon, avail + 4 + 2 * num),
              u16(mon, used), u16(mon, used + 2), u16(mon, used + 4 + 8 * num)))


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    try:
        mon = Monitor(sys.argv[1])
    except OSError as e:
        print("virtq-dump: cannot reach the monitor %s: %s" % (sys.argv[1], e))
        return 1
    try:
        print(mon.cmd("info virtio-status %s" % PATH))
        for r in range(rounds):
            if r:
                time.sleep(1)
            print("-- round %d (%s)" % (r + 1, time.strftime("%H:%M:%S")))
            for q in (0, 1):
                queue(mon, q)
        # Then take the link down and up: qemu's virtio-net then
        # reschedules a transmit queue that still waits for its bottom
        # half (tx_waiting), and does nothing for one that does not. If
        # the queue moves after this, qemu had a kick and sat on it; if
        # it does not, no kick reached the queue.
        print("-- set_link nic0 off/on (%s)" % time.strftime("%H:%M:%S"))
        print(mon.cmd("set_link nic0 off"))
        time.sleep(1)
        print(mon.cmd("set_link nic0 on"))
        time.sleep(2)
        print("-- after the link came back (%s)" % time.strftime("%H:%M:%S"))
        for q in (0, 1):
            queue(mon, q)
    except OSError as e:
        print("virtq-dump: monitor went away: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
