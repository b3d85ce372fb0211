#!/usr/bin/env python3
"""Writes the decoder fuzzer's seed corpus: one small, valid pgoutput message per kind.

Layouts from docs/pgoutput.md §3 / postgres proto.c logicalrep_write_*: big-endian integers,
NUL-terminated strings, TupleData = Int16 ncols + per column 'n' | 'u' | 't'/'b' Int32 len bytes.
Run from anywhere; rewrites fuzz/corpus/decoder/. The fuzzer decodes every input under all
four DecodeOptions, so in-stream and parallel-abort variants need no marker byte.
"""
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "decoder"


def i8(v): return struct.pack(">B", v)
def i16(v): return struct.pack(">H", v)
def i32(v): return struct.pack(">I", v & 0xFFFFFFFF)
def i64(v): return struct.pack(">Q", v & 0xFFFFFFFFFFFFFFFF)
def s(text): return text.encode() + b"\0"
def text(v): return b"t" + i32(len(v)) + v
def binary(v): return b"b" + i32(len(v)) + v


LSN, END, TS, XID, RELID = 0x16B374D848, 0x16B374D9A0, 851_234_567_890_123, 731, 16384
TUPLE = i16(4) + text(b"1") + b"n" + b"u" + binary(b"\x00\xff")
KEY = i16(1) + text(b"1")

SEEDS = {
    "B_begin": b"B" + i64(LSN) + i64(TS) + i32(XID),
    "C_commit": b"C" + i8(0) + i64(LSN) + i64(END) + i64(TS),
    "O_origin": b"O" + i64(LSN) + s("node"),
    "R_relation": b"R" + i32(RELID) + s("public") + s("outbox") + b"d" + i16(2)
    + i8(1) + s("id") + i32(23) + i32(-1) + i8(0) + s("body") + i32(25) + i32(-1),
    "R_relation_in_stream": b"R" + i32(XID) + i32(RELID) + s("") + s("t") + b"f" + i16(1)
    + i8(1) + s("id") + i32(23) + i32(-1),
    "Y_type": b"Y" + i32(16398) + s("public") + s("mood"),
    "I_insert": b"I" + i32(RELID) + b"N" + TUPLE,
    "I_insert_in_stream": b"I" + i32(XID) + i32(RELID) + b"N" + i16(1) + text("é".encode()),
    "U_update": b"U" + i32(RELID) + b"N" + TUPLE,
    "U_update_key": b"U" + i32(RELID) + b"K" + KEY + b"N" + TUPLE,
    "U_update_old": b"U" + i32(RELID) + b"O" + TUPLE + b"N" + TUPLE,
    "D_delete": b"D" + i32(RELID) + b"K" + KEY,
    "T_truncate": b"T" + i32(2) + i8(3) + i32(RELID) + i32(RELID + 1),
    "M_message": b"M" + i8(1) + i64(LSN) + s("outbox") + i32(7) + b"content",
    "S_stream_start": b"S" + i32(XID) + i8(1),
    "E_stream_stop": b"E",
    "c_stream_commit": b"c" + i32(XID) + i8(0) + i64(LSN) + i64(END) + i64(TS),
    "A_stream_abort": b"A" + i32(XID) + i32(XID + 1),
    "A_stream_abort_parallel": b"A" + i32(XID) + i32(XID) + i64(LSN) + i64(TS),
    "b_begin_prepare": b"b" + i64(LSN) + i64(END) + i64(TS) + i32(XID) + s("gid-1"),
    "P_prepare": b"P" + i8(0) + i64(LSN) + i64(END) + i64(TS) + i32(XID) + s("gid-1"),
    "p_stream_prepare": b"p" + i8(0) + i64(LSN) + i64(END) + i64(TS) + i32(XID) + s("gid-1"),
    "K_commit_prepared": b"K" + i8(0) + i64(LSN) + i64(END) + i64(TS) + i32(XID) + s("gid-1"),
    "r_rollback_prepared": b"r" + i8(0) + i64(LSN) + i64(END) + i64(TS) + i64(TS + 1) + i32(XID) + s("gid-1"),
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.bin"):
        old.unlink()
    for name, data in SEEDS.items():
        (OUT / f"{name}.bin").write_bytes(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
