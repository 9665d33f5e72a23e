"""Record batch format benchmark: one command, tables with a baseline measured in the same run.

    .venv/bin/python benchmarks/format.py [--quick]

Table 1: encode and decode (+ to Arrow) throughput for 200-byte log lines at
batch sizes 1, 50 and 1000 per codec. Baselines: encode against
``b"".join(values)`` plus the same codec's compress call (the least any
format has to do); decode against pyarrow IPC reading the same key/value
table (IPC's own lz4/zstd compression for those codecs; for none and gzip an
uncompressed IPC read, plus ``zlib.decompress`` for gzip). "decode run" is
``to_arrow`` over all batches back to back, as a consumer's fetch returns
them (the vectorised path for small batches); "decode 1by1" decodes batch by
batch.

Table 2: CRC-32C implementations (crc32c, google-crc32c when importable,
crcmod) at batch-like sizes. Table 3: lz4 frame vs lz4 block on log lines.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib

import lz4.block
import lz4.frame
import numpy as np
import pyarrow as pa

from pyspark_logsource.format import batch as B
from pyspark_logsource.format import compression as C

MSG = 200


def log_lines(n: int, size: int | None = MSG, seed: int = 1) -> list[bytes]:
    """Synthetic but realistic access-log lines (repeated hosts, paths, agents; varying ids)."""
    rng = np.random.default_rng(seed)
    paths = [
        b"/api/v1/orders",
        b"/api/v1/users/%d",
        b"/static/app.js",
        b"/checkout",
        b"/search?q=%d",
        b"/health",
    ]
    agents = [
        b"Mozilla/5.0 (X11; Linux x86_64)",
        b"curl/8.5.0",
        b"python-requests/2.32",
        b"Mozilla/5.0 (iPhone)",
    ]
    out = []
    t0 = 1_763_700_000
    for i in range(n):
        p = paths[rng.integers(len(paths))]
        if b"%d" in p:
            p = p % int(rng.integers(1, 10**6))
        line = b'10.%d.%d.%d - - [%d] "GET %s HTTP/1.1" %d %d %.3f "%s" req=%016x' % (
            rng.integers(256),
            rng.integers(256),
            rng.integers(256),
            t0 + i // 50,
            p,
            [200, 200, 200, 304, 404, 500][rng.integers(6)],
            rng.integers(100, 50000),
            rng.random(),
            agents[rng.integers(len(agents))],
            rng.integers(2**63),
        )
        if size is not None:
            line = (line + b" " * size)[:size]
        out.append(line)
    return out


def best(fn, min_time: float = 0.25, repeat: int = 3) -> float:
    """Seconds per call: the best of ``repeat`` timing loops of at least ``min_time`` each."""
    fn()
    loops = 1
    while True:
        t = time.perf_counter()
        for _ in range(loops):
            fn()
        dt = time.perf_counter() - t
        if dt >= min_time / 4:
            break
        loops *= 4
    loops = max(1, int(loops * min_time / dt))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - t) / loops)
    return min(times)


def ipc_bytes(table: pa.Table, codec: str) -> bytes:
    comp = {"lz4": "lz4", "zstd": "zstd"}.get(codec)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=comp)) as w:
        w.write_table(table)
    return sink.getvalue()


def table1(total: int, sizes: list[int]) -> list[tuple]:
    values = log_lines(total)
    keys = [b"user-%06d" % (i % 5000) for i in range(total)]
    ts = 1_763_700_000_000
    rows = []
    for codec in ("none", "gzip", "lz4", "zstd"):
        cid = C.codec_id(codec)
        for bs in sizes:
            m = total // bs
            chunks = [(values[i * bs : (i + 1) * bs], keys[i * bs : (i + 1) * bs]) for i in range(m)]
            nmsg = m * bs
            payload = sum(len(v) + len(k) for vs, ks in chunks for v, k in zip(vs, ks, strict=True))

            def enc(chunks=chunks, cid=cid):
                return [B.encode(vs, ks, ts, codec=cid) for vs, ks in chunks]

            if cid == C.NONE:

                def enc_base(chunks=chunks):
                    return [b"".join(vs) + b"".join(ks) for vs, ks in chunks]
            else:

                def enc_base(chunks=chunks, cid=cid):
                    return [C.compress(cid, b"".join(vs) + b"".join(ks)) for vs, ks in chunks]

            bufs = [bytes(b) for b in enc()]
            run = b"".join(bufs)

            def dec_1by1(bufs=bufs):
                return [B.decode(b).to_arrow() for b in bufs]

            def dec_run(run=run):
                return B.to_arrow(run)

            tables = [
                pa.table({"key": pa.array(ks, pa.binary()), "value": pa.array(vs, pa.binary())})
                for vs, ks in chunks
            ]
            ipcs = [ipc_bytes(t, codec) for t in tables]
            zipped = (
                [zlib.compress(bytes(ipc_bytes(t, "none")), 1) for t in tables] if codec == "gzip" else None
            )

            def dec_base(ipcs=ipcs, zipped=zipped):
                if zipped is not None:
                    return [pa.ipc.open_stream(zlib.decompress(z)).read_all() for z in zipped]
                return [pa.ipc.open_stream(b).read_all() for b in ipcs]

            t_enc, t_enc_b = best(enc), best(enc_base)
            t_1by1, t_run, t_dec_b = best(dec_1by1), best(dec_run), best(dec_base)
            wire = len(run)
            for op, t, tb in (
                ("encode", t_enc, t_enc_b),
                ("decode 1by1", t_1by1, t_dec_b),
                ("decode run", t_run, t_dec_b),
            ):
                rows.append((codec, bs, op, nmsg / t, payload / t / 1e6, nmsg / tb, tb / t, wire / payload))
    return rows


def table2() -> list[tuple]:
    import crcmod.predefined
    from crc32c import crc32c as crc_a

    impls = [("crc32c", crc_a)]
    try:
        import google_crc32c

        impls.append(("google-crc32c", google_crc32c.value))
    except ImportError:
        pass
    impls.append(("crcmod", crcmod.predefined.mkPredefinedCrcFun("crc-32c")))
    data = np.random.default_rng(3).bytes(1 << 20)
    rows = []
    for size in (250, 11_000, 220_000, 1 << 20):
        blob = data[:size]
        ref = crc_a(blob)
        for name, fn in impls:
            assert fn(blob) == ref, name
            t = best(lambda fn=fn, blob=blob: fn(blob), min_time=0.1)
            rows.append((name, size, size / t / 1e9, t * 1e6))
    return rows


def _lz4_row(name: str, bs: int, data: bytes, comp, decomp) -> tuple:
    packed = comp()
    assert decomp(packed) == data
    return (
        name,
        bs,
        len(data) / len(packed),
        len(data) / best(comp, 0.1) / 1e6,
        len(data) / best(lambda: decomp(packed), 0.1) / 1e6,
    )


def table3() -> list[tuple]:
    rows = []
    for bs in (50, 1000):
        data = b"".join(log_lines(bs, size=None, seed=5))
        rows.append(
            _lz4_row(
                "frame",
                bs,
                data,
                lambda d=data: lz4.frame.compress(d, store_size=False),
                lz4.frame.decompress,
            )
        )
        rows.append(
            _lz4_row(
                "block",
                bs,
                data,
                lambda d=data: lz4.block.compress(d, store_size=False),
                lambda p, n=len(data): lz4.block.decompress(p, uncompressed_size=n),
            )
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer messages (a smoke run)")
    args = ap.parse_args(argv)
    total = 2000 if args.quick else 20_000
    print(
        f"record batch format, {MSG}-byte log lines + 11-byte keys, {total} messages per cell; "
        f"python {sys.version.split()[0]}, pyarrow {pa.__version__}\n"
    )
    hdr = ("codec", "batch", "op", "msg/s", "MB/s", "baseline msg/s", "ratio", "wire/payload")
    print("{:<6} {:>6} {:<12} {:>12} {:>9} {:>15} {:>7} {:>13}".format(*hdr))
    for codec, bs, op, mps, mbs, base, ratio, wire in table1(total, [1, 50, 1000]):
        print(
            f"{codec:<6} {bs:>6} {op:<12} {mps:>12,.0f} {mbs:>9.1f} {base:>15,.0f} {ratio:>7.2f} {wire:>13.3f}"
        )
    print(
        "\nbaseline: encode = b''.join(values) [+ the codec's compress]; decode = pyarrow IPC read of the same "
        "key/value table [IPC lz4/zstd; gzip: zlib.decompress + IPC]. ratio = ours / baseline throughput.\n"
    )
    print(f"{'crc-32c impl':<14} {'bytes':>9} {'GB/s':>9} {'us/call':>9}")
    for name, size, gbs, us in table2():
        print(f"{name:<14} {size:>9} {gbs:>9.2f} {us:>9.2f}")
    print(f"\n{'lz4':<6} {'lines':>6} {'ratio':>7} {'compress MB/s':>14} {'decompress MB/s':>16}")
    for name, bs, ratio, cm, dm in table3():
        print(f"{name:<6} {bs:>6} {ratio:>7.2f} {cm:>14.0f} {dm:>16.0f}")


if __name__ == "__main__":
    main()
