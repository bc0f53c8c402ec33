"""`drmas card`: a profile run's result card (results/<profile>/card.json), or the Markdown of
one of a card's tables; `drmas verify`: a run's card against the reference card, row by row
(drmas/report/card.py, drmas/report/verify.py, docs/cards.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from drmas.cli.arguments import add_command


def cmd_card(args) -> None:
    from drmas.report.card import CARD, build_card, load_card, write_card

    if args.render:
        from drmas.report.cardmd import render

        suite, table, columns = (args.render.split(":") + ["", ""])[:3]
        sys.stdout.write(render(load_card(args.results), suite, table or "main", columns or None))
        return
    res = Path(args.results)
    numerics = None
    if not args.no_numerics:
        numerics = _numerics(res)
    card = build_card(res, numerics=numerics,
                      machine_name=args.machine or os.environ.get("DRMAS_MACHINE"))
    out = Path(args.out) if args.out else res / CARD
    write_card(card, out)
    rows = sum(len(t["rows"]) for s in card["tables"].values() for t in s.values())
    print(f"drmas card: {out} ({len(card['runs'])} runs, {len(card['evals'])} evaluations, "
          f"{rows} table rows; numerics "
          f"{(card['numerics'] or {}).get('fingerprint', 'not measured')})")


def _numerics(res: Path) -> dict:
    """The numerics fingerprint (drmas check numerics) under the profile's `cpu_kernels` and
    `threads`, computed before this process runs any other torch kernel."""
    from drmas.bench.numerics import fingerprint
    from drmas.config.profile import load
    from drmas.errors import DataError
    from drmas.models.kernels import pin

    config = res / "config.yaml"
    if not config.is_file():
        raise DataError(f"{res}: no config.yaml (not a results/<profile> folder of a run)")
    cfg = load(config)
    pin(cfg.cpu_kernels)
    return fingerprint(threads=cfg.threads)


def cmd_verify(args) -> int:
    from drmas.data.io import atomic_write_text
    from drmas.report.card import card_path, load_card, reference_path
    from drmas.report.verify import as_json, summary, verify

    from drmas.errors import DataError

    run = card_path(args.results)
    card = load_card(run)
    ref = Path(args.reference) if args.reference else reference_path(run.parent, card["profile"])
    try:
        reference = load_card(ref)
    except DataError as e:
        if not args.report_only:
            raise
        # the workflow's last rule: say why nothing was compared, never fail the run for it
        text = f"drmas verify: {run}: nothing compared: {' '.join(str(e).split())}\n"
        sys.stdout.write(text)
        if args.out:
            atomic_write_text(Path(args.out), text)
            atomic_write_text(Path(args.out).with_suffix(".json"),
                              json.dumps({"ok": None, "error": str(e)}) + "\n")
        return 0
    verdict = verify(card, reference)
    text = summary(verdict, str(run), str(ref))
    sys.stdout.write(text)
    if args.out:
        out = Path(args.out)
        atomic_write_text(out, text)
        atomic_write_text(out.with_suffix(".json"), json.dumps(as_json(verdict), indent=1,
                                                               ensure_ascii=False) + "\n")
    return 3 if not verdict.ok and not args.report_only else 0


def add_commands(sub) -> None:
    """card, verify."""
    sp = add_command(sub, "card", cmd_card, "the result card of a profile run (card.json: "
                     "versions, machine, numerics fingerprint, data hashes, every table row); "
                     "with --render, a card table as Markdown", suite=None)
    sp.add_argument("results", nargs="?", default="results/default",
                    help="the run's results folder (default: results/default); with --render, "
                         "a card file or a folder holding card.json")
    sp.add_argument("--out", default=None, help="card file to write (default: <results>/card.json)")
    sp.add_argument("--machine", default=None,
                    help="a name for this machine, kept in the card (default: $DRMAS_MACHINE; reference "
                         "cards name theirs)")
    sp.add_argument("--no-numerics", action="store_true",
                    help="skip the numerics fingerprint (about 10 s of training; its field is null)")
    sp.add_argument("--render", metavar="SUITE[:TABLE[:COLUMNS]]", default=None,
                    help="print a card table as docs markers hold it (TABLE: main, stats, "
                         "ablations, stability, behaviour; COLUMNS: a column-name prefix)")

    sp = add_command(sub, "verify", cmd_verify, "compare a run's result card with the reference "
                     "card, row by row (identical, within the reference interval, outside); "
                     "exit 3 when a row is outside or missing", suite=None)
    sp.add_argument("results", nargs="?", default="results/default",
                    help="a card file or a folder holding card.json (default: results/default)")
    sp.add_argument("--reference", default=None,
                    help="the reference card (default: results/reference/<profile>.json beside "
                         "the results folder)")
    sp.add_argument("--out", default=None,
                    help="also write the summary there (and every cell's verdict to the same "
                         "name with .json)")
    sp.add_argument("--report-only", action="store_true",
                    help="exit 0 even when rows are outside (the workflow's last rule: its exit "
                         "status is about the run, not the reproduction)")
