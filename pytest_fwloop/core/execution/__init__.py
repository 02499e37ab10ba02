"""Which code ran: the counts gcov and QEMU give, read and mapped to the lines of the tree, and
the build variables that make a host build count (pure)."""
