"""Command line: `python -m reports show DIR | compare BASE NEW | merge DIR... --out DIR | map DIR`.

show     print summary.md of a report directory (rebuilt from the results and the shrunk
         boundaries when it is missing)
compare  markdown diff of two runs; exit 1 when NEW fails what BASE passed (at the levels of
         --fail-on harmful|fine|any, default any), lost coverage that BASE had (unless
         --allow-missing GLOB), or did not finish (the PR gate)
merge    one report from the shards of a run (their results, case data and shrunk boundaries);
         exit 1 when a shard or group is missing (unless --allow-partial) or two shards ran one
         group
map      draw the explored and grid cases on the (α, β) plane, one panel per dtype, as a PNG
         (default DIR/map.png) and print its path

Exit 2 with a one-line reason on stderr when an input cannot be read (or, for merge, when the
inputs are not the shards of one run).
"""

from __future__ import annotations

import argparse
import os
import sys

from record.store import ReportError, read_environment, read_results

from .defects import DEFAULT_FAIL_ON, FAIL_ON


def _show(args) -> int:
    path = os.path.join(args.dir, "summary.md")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    else:
        from .map import read_boundaries
        from .overview import summary_markdown

        text = summary_markdown(read_results(args.dir), read_environment(args.dir),
                                read_boundaries(args.dir))
    sys.stdout.write(text)
    return 0


def _compare(args) -> int:
    from .compare import compare
    from .report import read_report

    base, new = read_report(args.base), read_report(args.new)
    text, status = compare(base.frame, new.frame, base.environment, new.environment,
                           gate_throughput=args.gate_throughput,
                           allow_missing=tuple(args.allow_missing or ()),
                           base_partial=base.partial, new_partial=new.partial,
                           fail_on=args.fail_on)
    sys.stdout.write(text)
    return status


def _merge(args) -> int:
    from .merge import merge

    merged = merge(args.dirs, args.out, allow_partial=args.allow_partial)
    print(f"merged {len(args.dirs)} report(s) into {merged.path}")
    cov = merged.coverage
    for line in merged.partial:
        print(f"reports merge: {line}", file=sys.stderr)
    if cov is None:
        if merged.partial and not args.allow_partial:
            print("reports merge: INCOMPLETE: an input did not finish (exit 1; --allow-partial "
                  "accepts a partial run)", file=sys.stderr)
            return 1
        return 0
    for line in cov.warnings:
        print(f"reports merge: warning: {line}", file=sys.stderr)
    for line in cov.problem_lines():
        print(f"reports merge: {line}", file=sys.stderr)
    status = cov.status_line()
    if cov.overlaps:
        print(f"reports merge: {status}", file=sys.stderr)
        return 1
    if not cov.complete:
        accepted = " (accepted: --allow-partial)" if args.allow_partial else \
            " (exit 1; --allow-partial accepts a partial run)"
        print(f"reports merge: {status}{accepted}", file=sys.stderr)
        return 0 if args.allow_partial else 1
    print(status)
    if merged.partial and not args.allow_partial:
        print("reports merge: INCOMPLETE: an input did not finish (exit 1; --allow-partial "
              "accepts a partial run)", file=sys.stderr)
        return 1
    return 0


def _map(args) -> int:
    from .map import render_map_dir

    print(render_map_dir(args.dir, args.out))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m reports", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("show", help="print the summary of a report directory")
    s.add_argument("dir")
    s.set_defaults(fn=_show)
    c = sub.add_parser("compare", help="compare two report directories (exit 1 on new failures)")
    c.add_argument("base")
    c.add_argument("new")
    c.add_argument("--gate-throughput", action="store_true",
                   help="also exit 1 when a case's throughput dropped more than 2x")
    c.add_argument("--allow-missing", action="append", metavar="GLOB",
                   help="a key case/dtype/check/device_type matching GLOB may lose coverage "
                        "without failing the gate (repeatable)")
    c.add_argument("--fail-on", default=DEFAULT_FAIL_ON, choices=tuple(FAIL_ON),
                   help="the levels a new failure fails the gate at: harmful (harmful only), "
                        "fine (harmful and fine-structure), any (also api; the default); rows "
                        "no diagnosis rated count at every setting")
    c.set_defaults(fn=_compare)
    m = sub.add_parser("merge", help="merge report directories of a sharded run")
    m.add_argument("dirs", nargs="+", metavar="DIR")
    m.add_argument("--out", required=True, metavar="DIR")
    m.add_argument("--allow-partial", action="store_true",
                   help="exit 0 when shards or groups are missing (the report says what is missing)")
    m.set_defaults(fn=_merge)
    fm = sub.add_parser("map", help="draw the failure map of a report directory (a PNG)")
    fm.add_argument("dir")
    fm.add_argument("--out", metavar="PATH", help="where to write the PNG (default DIR/map.png)")
    fm.set_defaults(fn=_map)
    args = p.parse_args(argv)  # argparse itself exits 2 on bad usage
    try:
        return args.fn(args)
    except ReportError as exc:
        print(f"reports {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head` closed the pipe: not an error of ours
        return 0


if __name__ == "__main__":
    sys.exit(main())
