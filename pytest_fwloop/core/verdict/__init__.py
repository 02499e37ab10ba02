"""The verdict of each iteration: convergence (seed 001 §5.19), the baseline gate, the advice
per iteration, metrics, the coder's confidence, declined tests."""
