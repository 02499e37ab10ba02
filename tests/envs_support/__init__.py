"""Real rigs for the environment tests (a pty board, a tiny ARM firmware, a private sshd), the
bundled examples as scratch copies, faults to inject, and /proc checks for what is left running."""
