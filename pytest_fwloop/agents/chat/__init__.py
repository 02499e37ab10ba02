"""What the `openai:` provider needs to meet real chat-completions servers: the transport
(`transport`, streamed answers put together in `stream`), what a server refuses (`refusals`),
an error reply as the error it stands for (`http_errors`) and what a run learns of it
(`server`)."""
