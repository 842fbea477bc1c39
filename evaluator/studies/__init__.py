"""Studies of the product, not the product: timing benchmarks and the evidence behind rules.

`tinyrouter dev STUDY` runs them (`tinyrouter dev --help` lists each). Nothing outside this
package and the `dev` command imports it (tests/test_structure.py), so what they time stays
what ships.
"""
