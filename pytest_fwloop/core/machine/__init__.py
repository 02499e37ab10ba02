"""The run as a state machine: states and transitions, outcomes, recovery, clocks, limits,
the agents' spend, and the exact numbers every threshold is compared in."""
