"""Classic pcap files (as tcpdump -w writes them, microsecond or nanosecond stamps, either byte
order) read and written record by record, for the scripts that rewrite or measure captures
(lab-artefacts.py, capture-timing.py)."""
import struct


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError(f"{path}: not a pcap file (shorter than its header)")
    magic = struct.unpack("<I", data[:4])[0]
    endian = {0xA1B2C3D4: "<", 0xA1B23C4D: "<", 0xD4C3B2A1: ">", 0x4D3CB2A1: ">"}.get(magic)
    if endian is None:
        raise ValueError(f"{path}: not a classic pcap file (magic {magic:#x})")
    records, at = [], 24
    while at + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(endian + "IIII", data[at:at + 16])
        records.append([sec, frac, incl, orig, data[at + 16:at + 16 + incl]])
        at += 16 + incl
    nanos = magic in (0xA1B23C4D, 0x4D3CB2A1)
    return data[:24], endian, nanos, records


def write_pcap(path, header, endian, records):
    with open(path, "wb") as f:
        f.write(header)
        for sec, frac, _, orig, frame in records:
            f.write(struct.pack(endian + "IIII", sec, frac, len(frame), orig))
            f.write(frame)
