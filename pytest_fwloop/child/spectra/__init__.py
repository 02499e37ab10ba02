"""What each test ran, recorded inside a child pytest: Python lines (coverage.py), C lines
(gcov, on the host or in the tests' own process), and the blocks a QEMU guest executed."""
