"""Benchmarks for langgraph_ctx: `python -m benchmarks [section ...] [--quick]`.

Each section is a module with `run(args: argparse.Namespace) -> None` that prints its tables
(see `benchmarks._table.print_table`) and is registered by name in
`benchmarks.__main__.SECTIONS`. `args.quick` asks for a short run.
"""
