"""What goes on disk and on the wire: the agent protocol, run and round records, the persisted
run state, node ids, the child's environment, redaction."""
