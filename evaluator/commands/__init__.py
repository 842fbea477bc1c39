"""The command layer: one module per `tinyrouter` subcommand (see `cli.COMMANDS`), plus how
commands print (`output`) and render results (`reports`).

A command module's `PARSERS` maps each subcommand it serves to a function that adds its
options to a parser and sets `func`, the handler that receives the parsed arguments and
returns the exit code. Only this layer prints for humans; the library below raises typed
errors.
"""
