"""Real rigs for the envs tests: a pty board, a tiny ARM firmware, a private sshd."""
