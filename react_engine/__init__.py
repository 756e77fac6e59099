"""react-engine: ReAct agents over any OpenAI-compatible chat API."""
