"""Google's `countTokens` for a `ChatGoogleGenerativeAI` model (langchain-google-genai).

LangChain's Gemini model counts only text (`get_num_tokens`); its
`get_num_tokens_from_messages` is LangChain's generic one, which counts each message's
rendered text on its own (a request per message, tools ignored). `GeminiCountApi` counts the
prompt the model would send instead: LangChain builds the request (`model._prepare_request`,
the call its `generate` makes: `_parse_chat_history` for the contents and the system
instruction, `convert_to_genai_function_declarations` for the tools), and the model's own
`google.genai.Client` counts it (`client.models.count_tokens`), with the model's timeout and
retries. `_prepare_request` is langchain-google-genai's private method (4.x): should it change,
the count fails and `ProviderCounter` falls back to the approximation with a warning.

The system instruction and the tools: google-genai sends `CountTokensConfig.system_instruction`
and `.tools` only to Vertex AI; on the Gemini Developer API it refuses them (`ValueError`,
"only supported in ... Agent Platform mode"). The Developer API's reference for
`models.countTokens` takes them in its other request form, `generateContentRequest` (the
model, contents, system instruction and tools, as `generateContent` takes them; `contents` is
ignored when it is set, and the two are not to be sent together). So on the Developer API a
prompt with a system instruction or tools is sent as a `generateContentRequest`, through
google-genai's public `HttpOptions.extra_body`, with the top-level `contents` emptied; a prompt
of contents alone goes as plain `contents`, the ordinary call.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage


def is_gemini_model(model: Any) -> bool:
    """Whether `model` is a `ChatGoogleGenerativeAI`: a google-genai client, LangChain's request."""
    models = getattr(getattr(model, "client", None), "models", None)
    return callable(getattr(models, "count_tokens", None)) and callable(
        getattr(model, "_prepare_request", None)
    )


class GeminiCountApi:
    """Asks Google's `countTokens` for the tokens of a prompt, built by LangChain's converters.

    Args:
        model: A `ChatGoogleGenerativeAI` (Gemini Developer API or Vertex AI).
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, messages: list[BaseMessage], tools: list[Any] | None) -> int:
        """The provider's count of `messages` (and `tools` bound, when given)."""
        from google.genai import types

        request = self.model._prepare_request(messages, tools=tools or None)
        name, contents = request["model"], request["contents"]
        config = request["config"]  # a GenerateContentConfig: what generate_content would send
        system, bound = config.system_instruction, config.tools
        http = config.http_options  # the model's timeout and retries
        client = self.model.client
        if client.vertexai:  # Vertex AI's countTokens takes both beside the contents
            count = types.CountTokensConfig(
                system_instruction=system, tools=bound, http_options=http
            )
        elif system is None and not bound:
            count = types.CountTokensConfig(http_options=http)
        else:  # the Developer API: the generateContentRequest form (module docstring)
            body: dict[str, Any] = {
                "model": name if "/" in name else f"models/{name}",
                "contents": [_rest(c) for c in contents],
            }
            if system is not None:
                body["systemInstruction"] = _rest(system)
            if bound:
                body["tools"] = [_rest(t) for t in bound]
            extra = {"contents": [], "generateContentRequest": body}
            http = (http or types.HttpOptions()).model_copy(update={"extra_body": extra})
            count = types.CountTokensConfig(http_options=http)
        result = client.models.count_tokens(model=name, contents=contents, config=count)
        if result.total_tokens is None:
            msg = f"countTokens for {name} answered no totalTokens"
            raise ValueError(msg)
        return int(result.total_tokens)


def _rest(value: Any) -> Any:
    # A google-genai type as the REST API's JSON: camelCase names (its alias), bytes in base64.
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)
