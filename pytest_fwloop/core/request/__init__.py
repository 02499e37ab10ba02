"""What a model is sent or may read: the failure pack, failure evidence, code symbols, the
ranking and the spectrum's suspicion, source packing, read-only tools, hidden paths."""
