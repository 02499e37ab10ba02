"""The coder, reviewer and tester agents (DESIGN.md §5).

`protocol` (the wire format and the strict-JSON gate) and `errors` are pure; the providers
(`command`, `scripted`, `rules`) are the only modules here that touch processes or files.
Import from the submodules: re-exporting them here would pull subprocess into the pure core,
which imports `protocol`.
"""
