"""What an operator drives after or between runs: continuing a recorded run, applying its best
tree, chat with a role, the threads of messages."""
