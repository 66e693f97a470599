"""The `queuescope` command: wires the layers together; holds no logic of its own."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime

from queuescope.certs_cli import add_certs_parser, run_certs
from queuescope.serve import add_serve_parser, run_serve
from queuescope.trace_cli import add_trace_parser, run_trace
from scheduler.api.decode import ApiError, load_documents
from scheduler.api.versions import KUEUE_GROUP, KUEUE_VERSIONS, short_version
from scheduler.forecast.forecaster import Forecaster
from scheduler.forecast.records import FORECAST, METHODS
from scheduler.sim.api_version import in_api_version, input_api_version
from scheduler.sim.endless import EndlessRunError
from scheduler.sim.forecasts import ForecastRecorder
from scheduler.sim.output import build_list, render_json, render_table, render_yaml
from scheduler.sim.runner import Simulation, SimulationError

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="queuescope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="replay a scenario offline on a virtual clock")
    sim.add_argument("paths", nargs="+", metavar="PATH", help="YAML file, directory, or -")
    mode = sim.add_mutually_exclusive_group()
    mode.add_argument("--cycles", type=int, metavar="N", help="run exactly N cycles")
    mode.add_argument("--until-idle", action="store_true", help="run until nothing changes")
    sim.add_argument("--start-time", metavar="RFC3339", help="virtual clock start")
    sim.add_argument("-o", "--output", choices=("json", "yaml", "table"), default="json")
    sim.add_argument(
        "--api-version",
        choices=tuple(short_version(v) for v in KUEUE_VERSIONS),
        help="kueue.x-k8s.io version of the output (default: the version of the input)",
    )
    sim.add_argument(
        "--record-forecasts",
        action="store_true",
        help="append a WorkloadForecast per workload still pending after its arrival instant",
    )
    sim.add_argument(
        "--forecast-method",
        choices=METHODS,
        help=f"runtime model of the forecasts (default: {FORECAST}); needs --record-forecasts",
    )
    add_certs_parser(sub)
    add_serve_parser(sub)
    add_trace_parser(sub)
    return parser


def _parse_time(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            source="--start-time", index=None, path="", detail=f"invalid RFC 3339 time {value!r}"
        ) from None


def simulate(args: argparse.Namespace) -> int:
    try:
        if args.cycles is not None and args.cycles < 0:
            raise ApiError(source="--cycles", index=None, path="", detail="must be >= 0")
        start = _parse_time(args.start_time) if args.start_time else None
        if args.forecast_method is not None and not args.record_forecasts:
            raise ApiError(
                source="--forecast-method", index=None, path="", detail="needs --record-forecasts"
            )
        documents = load_documents(args.paths, generate_names=True)
        recorder = (
            ForecastRecorder(Forecaster(args.forecast_method or FORECAST))
            if args.record_forecasts
            else None
        )
        sim = Simulation(
            documents,
            cycles=args.cycles,
            until_idle=args.until_idle or None,
            start_time=start,
            observer=recorder,
        )
        result = sim.run()
        for warning in sim.rejected_updates:
            print(f"warning: {warning}", file=sys.stderr)
    except ApiError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except EndlessRunError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    except SimulationError as err:
        print(f"internal error: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    if args.output == "table":
        text = render_table(result)
    else:
        version = (
            f"{KUEUE_GROUP}/{args.api_version}"
            if args.api_version
            else input_api_version(documents)
        )
        doc = in_api_version(build_list(result), version)
        if recorder is not None:
            doc["items"].extend(recorder.items())
        text = render_json(doc) if args.output == "json" else render_yaml(doc)
    sys.stdout.write(text)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate":
        return simulate(args)
    if args.command == "certs":
        return run_certs(args)
    if args.command == "serve":
        return run_serve(args)
    if args.command == "trace":
        return run_trace(args, list(argv) if argv is not None else None)
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
