"""Subcommands of `tinyrouter`: each module here defines `register(subparsers)`.

A subcommand handler receives the parsed arguments and returns the exit code. Only
these modules print for humans; the library below them raises typed errors.
"""
