"""Command line of fsdp_checkpoint (see the package's docstring)."""
import argparse
import sys

from .dcp import CheckpointError, from_dcp, to_dcp


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fsdp_checkpoint")
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("from-dcp", help="a DCP checkpoint -> an fsdp-run checkpoint")
    a.add_argument("source")
    a.add_argument("out")
    a.add_argument("--plan", required=True, help="the plan fsdp-run will resume")
    a.add_argument("--data", default="synthetic",
                   help="fsdp-run's --data of the resumed run (recorded; resume checks it)")
    a.add_argument("--seed", type=int, default=0, help="fsdp-run's --seed of the resumed run")
    b = sub.add_parser("to-dcp", help="an fsdp-run checkpoint -> a DCP checkpoint")
    b.add_argument("source", help="a checkpoint directory (step-N) or its parent (latest)")
    b.add_argument("out")
    b.add_argument("--plan", required=True, help="the plan the checkpoint was saved with")
    args = ap.parse_args(argv)
    try:
        if args.command == "from-dcp":
            path = from_dcp(args.source, args.out, args.plan, args.data, args.seed)
        else:
            path = to_dcp(args.source, args.out, args.plan)
    except CheckpointError as e:
        print(f"fsdp_checkpoint: error: {e}", file=sys.stderr)
        return 1
    print(f"fsdp_checkpoint: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
