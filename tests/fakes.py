"""The one fake chat model of the test suite: the package's own `ScriptedChatModel`.

See `langgraph_ctx.scripted`; `scripted()` builds one whose exhausted script raises.
"""

from langgraph_ctx.scripted import ScriptedChatModel, Step, scripted

__all__ = ["ScriptedChatModel", "Step", "scripted"]
