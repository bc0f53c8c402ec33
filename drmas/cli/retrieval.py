"""The retrieval commands: `index` (a pyserini BM25 or dense index of a corpus JSONL) and
`serve` (an index over HTTP, the Search-R1 /retrieve API)."""

from __future__ import annotations

from drmas.cli.arguments import add_command, int_at_least, output_folder, positive

DEVICE_HELP = "dense: torch device (default: cuda:0 if present, else cpu)"


def cmd_index(args) -> None:
    from drmas.retrieval.kinds import build_index

    dense = {} if args.kind == "bm25" else dict(
        batch_size=args.batch_size, max_length=args.max_length, device=args.device)
    build_index(args.corpus, args.out, threads=args.threads, kind=args.kind,
                encoder=args.encoder, **dense)


def cmd_serve(args) -> None:
    from drmas.retrieval.server import serve

    serve(args.index, host=args.host, port=args.port, threads=args.threads, kind=args.kind,
          encoder=args.encoder, jvm_heap=args.jvm_heap, device=args.device)


def add_commands(sub) -> None:
    """index, serve."""
    sp = add_command(sub, "index", cmd_index,
                     "build a pyserini index (BM25 or dense) of a corpus JSONL", suite=None)
    sp.add_argument("--corpus", required=True, help="corpus JSONL ({id, contents} per line)")
    sp.add_argument("--out", required=True, type=output_folder, help="index folder to write")
    sp.add_argument("--threads", type=positive, default=1, help="indexing threads")
    sp.add_argument("--kind", choices=["bm25", "dense"], default="bm25",
                    help="bm25 (Lucene) or dense (an e5-style encoder and a FAISS flat index)")
    sp.add_argument("--encoder", help="dense: e5-style encoder folder (or hub id)")
    sp.add_argument("--batch-size", type=positive, default=64, help="dense: documents per batch")
    sp.add_argument("--max-length", type=positive, default=256, help="dense: tokens per document")
    sp.add_argument("--device", help=DEVICE_HELP)

    sp = add_command(sub, "serve", cmd_serve,
                     "serve an index over HTTP (Search-R1 /retrieve API)", suite=None)
    sp.add_argument("--index", required=True, help="index folder (from `drmas index`)")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on")
    sp.add_argument("--port", type=int_at_least(0, 65535), default=8000,
                    help="port to listen on (0: any free port)")
    sp.add_argument("--threads", type=positive, default=1, help="search threads per engine call")
    sp.add_argument("--kind", choices=["auto", "bm25", "dense"], default="auto",
                    help="index kind (default: read from the index folder)")
    sp.add_argument("--encoder", help="dense: query encoder (default: the one the index names)")
    sp.add_argument("--jvm-heap", default="1g", help="JVM heap cap, e.g. 512m or 2g")
    sp.add_argument("--device", help=DEVICE_HELP)
