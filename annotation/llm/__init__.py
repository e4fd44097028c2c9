"""The LLM that Stages 2 and 3 share: the chat interface with bounded retries
(:mod:`~annotation.llm.chat`), the paper's prompts and their answer parsers
(:mod:`~annotation.llm.prompts`), and the clients: a local ``transformers`` model
(:mod:`~annotation.llm.transformers_chat`) or an OpenAI-compatible endpoint
(:mod:`~annotation.llm.openai_chat`), chosen by :func:`annotation.llm.factory.make_chat`."""
