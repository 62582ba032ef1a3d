# SPDX-License-Identifier: BSD-3-Clause
"""Reading what is left of a damaged MCAP file, record by record.

rosbags' reader needs the file's footer and summary; a bag cut by a crash, a full disk or a copy
has neither. `scan_mcap` walks the records from the start, decodes every complete message (also the
complete messages of a cut, uncompressed chunk), stops at the first record that runs past the end
or does not parse, and says what it lost. Types come from the schemas stored in the file.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MCAP_MAGIC = b"\x89MCAP0\r\n"


@dataclass
class ScanResult:
    """What `scan_mcap` could read."""

    messages: list[tuple[str, str, int, Any]]
    """(topic, message type, log time [ns], deserialised message), in file order."""
    connections: dict[str, str]
    truncated: bool
    warnings: list[str]


class _Cursor:
    def __init__(self, buf, pos: int = 0):
        self.buf, self.pos = buf, pos

    def u16(self) -> int:
        """Read a little-endian uint16 and advance."""
        (v,) = struct.unpack_from("<H", self.buf, self.pos)
        self.pos += 2
        return v

    def u32(self) -> int:
        """Read a little-endian uint32 and advance."""
        (v,) = struct.unpack_from("<I", self.buf, self.pos)
        self.pos += 4
        return v

    def u64(self) -> int:
        """Read a little-endian uint64 and advance."""
        (v,) = struct.unpack_from("<Q", self.buf, self.pos)
        self.pos += 8
        return v

    def bytes(self, n: int) -> bytes:
        """Read `n` raw bytes and advance (struct.error past the buffer's end)."""
        if self.pos + n > len(self.buf):
            raise struct.error("record runs past the end of its buffer")
        v = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return v

    def string(self) -> str:
        """Read a uint32-length-prefixed UTF-8 string and advance."""
        return self.bytes(self.u32()).decode()


def scan_mcap(file: Path) -> ScanResult:
    """Read records until the data ends or stops making sense; keep everything complete before that."""
    schemas: dict[int, tuple[str, str, str]] = {}
    channels: dict[int, tuple[str, int]] = {}
    pending: list[tuple[int, int, bytes]] = []
    warnings: list[str] = []
    state = {"truncated": False, "footer": False}
    size = file.stat().st_size

    def parse(buf, start: int, end: int, in_chunk: bool, where: int) -> None:
        pos = start
        while pos < end:
            if pos + 9 > end:
                state["truncated"] = True
                return
            op = buf[pos]
            (length,) = struct.unpack_from("<Q", buf, pos + 1)
            body, body_end = pos + 9, pos + 9 + length
            if body_end > end:
                state["truncated"] = True
                if op == 0x06 and not in_chunk:
                    parse_chunk(buf, body, end, where + pos, partial=True)
                return
            try:
                record(op, buf, body, body_end, in_chunk, where + pos)
            except (struct.error, UnicodeDecodeError, zlib.error, ValueError) as err:
                state["truncated"] = True
                warnings.append(f"{file.name}: damaged record at byte {where + pos}: {err}")
                return
            if state["footer"]:
                return
            pos = body_end

    def record(op: int, buf, body: int, body_end: int, in_chunk: bool, offset: int) -> None:
        c = _Cursor(buf, body)
        if op == 0x03:  # schema
            sid = c.u16()
            name, encoding = c.string(), c.string()
            schemas[sid] = (name, encoding, c.bytes(c.u32()).decode())
        elif op == 0x04:  # channel
            cid, sid = c.u16(), c.u16()
            topic, _encoding = c.string(), c.string()
            channels[cid] = (topic, sid)
        elif op == 0x05:  # message
            cid, _seq, log_time, _publish = c.u16(), c.u32(), c.u64(), c.u64()
            pending.append((cid, log_time, bytes(buf[c.pos : body_end])))
        elif op == 0x06 and not in_chunk:
            parse_chunk(buf, body, body_end, offset, partial=False)
        elif op == 0x02:  # footer: the data section is over
            state["footer"] = True

    def parse_chunk(buf, body: int, end: int, offset: int, partial: bool) -> None:
        c = _Cursor(buf, body)
        try:
            c.u64(), c.u64()
            uncompressed_size, crc = c.u64(), c.u32()
            compression = c.string()
            compressed_size = c.u64()
        except struct.error:
            warnings.append(f"{file.name}: the chunk at byte {offset} is cut inside its header; its messages are lost")
            return
        available = min(compressed_size, end - c.pos)
        if compression == "":
            if not partial and crc and zlib.crc32(buf[c.pos : c.pos + available]) != crc:
                warnings.append(f"{file.name}: the chunk at byte {offset} fails its CRC; skipped")
                return
            before = len(pending)
            parse(buf, c.pos, c.pos + available, True, 0)
            if partial:
                warnings.append(f"{file.name}: the chunk at byte {offset} is cut after {available} of "
                                f"{compressed_size} bytes; kept its {len(pending) - before} complete messages")
            return
        if partial:
            warnings.append(f"{file.name}: the {compression} chunk at byte {offset} is cut; its messages are lost")
            return
        data = _decompress(compression, c.bytes(compressed_size), uncompressed_size)
        if crc and zlib.crc32(data) != crc:
            warnings.append(f"{file.name}: the chunk at byte {offset} fails its CRC; skipped")
            return
        parse(data, 0, len(data), True, 0)

    with open(file, "rb") as f:
        if size == 0:
            raise ValueError(f"{file} is empty: not a rosbag2 bag")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            parse(buf, len(MCAP_MAGIC), size, False, 0)
        finally:
            buf.close()
    if not state["footer"]:
        state["truncated"] = True
        warnings.insert(0, f"{file.name} ends without an MCAP footer after {size} bytes (cut or not closed): "
                        "read what was complete")

    connections, messages = _decode_scanned(file, schemas, channels, pending, warnings)
    return ScanResult(messages, connections, state["truncated"], warnings)


def _decompress(compression: str, data: bytes, size: int) -> bytes:
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    raise ValueError(f"unsupported chunk compression {compression!r}")


def _decode_scanned(file: Path, schemas, channels, pending, warnings) -> tuple[dict[str, str], list[tuple]]:
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    store = get_typestore(Stores.EMPTY)
    for name, encoding, text in schemas.values():
        try:
            if encoding == "ros2msg":
                store.register(get_types_from_msg(text, name))
            elif encoding == "ros2idl":
                store.register(get_types_from_idl(text))
        except Exception as err:  # noqa: BLE001 - a bad schema only loses its topic
            warnings.append(f"{file.name}: cannot parse the definition of {name}: {err}")
    connections = {topic: schemas.get(sid, ("?", "", ""))[0] for topic, sid in channels.values()}
    messages, undecodable = [], defaultdict(int)
    for cid, log_ns, data in pending:
        if cid not in channels:
            undecodable["<unknown channel>"] += 1
            continue
        topic, sid = channels[cid]
        msgtype = schemas.get(sid, ("?", "", ""))[0]
        try:
            messages.append((topic, msgtype, log_ns, store.deserialize_cdr(data, msgtype)))
        except Exception:  # noqa: BLE001 - counted and reported below
            undecodable[topic] += 1
    for topic, count in undecodable.items():
        warnings.append(f"{file.name}: {count} messages on {topic} could not be decoded")
    return connections, messages
