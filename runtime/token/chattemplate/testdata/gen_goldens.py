#!/usr/bin/env python3
"""Golden prompts for package chattemplate, rendered the way the serving engines render them.

Run from this directory:  python3 gen_goldens.py > goldens.json
Needs jinja2 >= 3.1 (3.1.6 used) and pydantic 2 (2.13 used); nothing is downloaded.

Each case is a chat request (messages, tools, chat_template_kwargs as JSON text, so key order
is the request's) rendered for two engines:

* The Jinja environment is HF transformers' `_compile_jinja_template`
  (src/transformers/utils/chat_template_utils.py, commit 5e43e2e8): an
  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
  extensions=[AssistantTracker, jinja2.ext.loopcontrols]) whose `tojson` filter is
  json.dumps(ensure_ascii=False, indent, separators, sort_keys=False), with the globals
  raise_exception (raises TemplateError) and strftime_now. The template is rendered with
  messages, tools, documents=None, add_generation_prompt, the special tokens and the
  chat_template_kwargs, as apply_chat_template does.
* vLLM's request handling before that call: vllm/entrypoints/chat_utils.py (commit bd5ec6d5;
  newer: vllm/renderers/chat_utils/parse_chat_message_content.py, commit be90fe16)
  `_parse_chat_message_content` (rebuilt messages, text parts joined with "\n") and
  `_postprocess_messages` (JSON-string tool arguments parsed, empty tool_calls dropped);
  tools are `[tool.model_dump() for tool in request.tools]` with vLLM's
  ChatCompletionToolsParam/FunctionDefinition (vllm/entrypoints/openai/engine/protocol.py);
  the content format ("string" or "openai") is detected as vllm/renderers/hf.py does.
* SGLang's: python/sglang/srt/entrypoints/openai/serving_chat.py (commit 0c078e6f; final
  assistant message, add_generation_prompt and reasoning_effort as of commit 002897c2)
  `_apply_jinja_template` (null content -> "", message.model_dump(), JSON-string arguments
  parsed with orjson/json, add_generation_prompt always True, a final assistant message
  turned into a user turn or, with continue_final_message, appended to the prompt,
  reasoning_effort passed only when the request sets it) and
  python/sglang/srt/jinja_template_utils.py `process_content_for_template_format` (text parts
  joined with " ", None-valued keys dropped); tools are
  `[item.function.model_dump() for item in request.tools]` when tools are non-empty, with
  the message/tool models of python/sglang/srt/entrypoints/openai/protocol.py.
"""

import json
import sys
from datetime import datetime
from typing import Any, Dict, List, Literal, Optional, Union

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, field_validator

REPO = "../../../.."

# --- HF transformers: the Jinja environment -------------------------------------------


class AssistantTracker(jinja2.ext.Extension):
    # Only the parser matters for rendering: {% generation %} blocks render their body.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def compile_template(src):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env, env.from_string(src)


def apply_chat_template(src, messages, special_tokens, tools=None, documents=None, add_generation_prompt=False, continue_final_message=False, **kwargs):
    # The parameters of PreTrainedTokenizerBase.apply_chat_template that reach the template.
    _, tpl = compile_template(src)
    template_kwargs = {**special_tokens, **kwargs}
    return tpl.render(messages=messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt, **template_kwargs)


# --- content format detection (vllm/renderers/hf.py; sglang jinja_template_utils.py) ---


def _is_var_access(node, varname):
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == varname


def _is_attr_access(node, varname, key):
    if isinstance(node, jinja2.nodes.Getitem):
        return _is_var_access(node.node, varname) and isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
    if isinstance(node, jinja2.nodes.Getattr):
        return _is_var_access(node.node, varname) and node.attr == key
    return False


def _is_var_or_elems_access(node, varname, key=None):
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Test):
        return _is_var_or_elems_access(node.node, varname, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _is_var_or_elems_access(node.node, varname, key)
    return _is_attr_access(node, varname, key) if key else _is_var_access(node, varname)


def _assigned_names(root, varname):
    yield varname
    pending = [varname]
    while pending:
        name = pending.pop(0)
        for a in root.find_all(jinja2.nodes.Assign):
            if _is_var_or_elems_access(a.node, name) and isinstance(a.target, jinja2.nodes.Name):
                yield a.target.name
                if a.target.name != name:
                    pending.append(a.target.name)


def vllm_content_format(src):
    env, _ = compile_template(src)
    ast = env.parse(src)
    messages_names = list(_assigned_names(ast, "messages"))
    message_names = []
    for loop in ast.find_all(jinja2.nodes.For):
        if any(_is_var_or_elems_access(loop.iter, n) for n in messages_names):
            message_names.append(loop.target.name)
    for loop in ast.find_all(jinja2.nodes.For):
        if any(_is_var_or_elems_access(loop.iter, n, "content") for n in message_names):
            return "openai"
    return "string"


def sglang_content_format(src):
    env, _ = compile_template(src)
    ast = env.parse(src)
    for loop in ast.find_all(jinja2.nodes.For):
        if any(_is_var_or_elems_access(loop.iter, n, "content") for n in ("message", "msg", "m")):
            return "openai"
    return "string"


# --- vLLM ------------------------------------------------------------------------------


class VllmBase(BaseModel):
    model_config = ConfigDict(extra="allow")


class VllmFunctionDefinition(VllmBase):
    name: str
    description: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None


class VllmTool(VllmBase):
    type: Literal["function"] = "function"
    function: VllmFunctionDefinition


TEXT_KEYS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal", "thinking": "thinking"}


def vllm_messages(messages, content_format):
    out = []
    for message in messages:
        role = message["role"]
        content = message.get("content")
        reasoning = message.get("reasoning")
        if content is None:
            content = []
        elif isinstance(content, str):
            content = [{"type": "text", "text": content}]
        texts = []
        for part in content:
            text = part if isinstance(part, str) else part.get(TEXT_KEYS[part["type"]])
            if text:  # vLLM: `if parse_res:`
                texts.append(text)
        if content_format == "openai":
            msg = {"role": role, "content": [{"type": "text", "text": t} for t in texts]}
        else:
            msg = {"role": role, "content": "\n".join(texts)}
        if role == "assistant":
            if message.get("tool_calls") is not None:
                msg["tool_calls"] = list(message["tool_calls"])
            if reasoning is not None:
                msg["reasoning"] = reasoning
                msg["reasoning_content"] = reasoning
        elif role == "tool":
            if "tool_call_id" in message:
                msg["tool_call_id"] = message["tool_call_id"]
            if isinstance(msg["content"], list):  # newer vLLM: tool results as a string
                msg["content"] = "\n".join(p["text"] for p in msg["content"])
        if "name" in message and isinstance(message["name"], str):
            msg["name"] = message["name"]
        if "task" in message and isinstance(message["task"], str):
            msg["task"] = message["task"]
        if role == "developer":
            msg["tools"] = message.get("tools", None)
        out.append(msg)
    # _postprocess_messages
    for msg in out:
        if msg["role"] == "assistant" and "tool_calls" in msg:
            calls = msg["tool_calls"]
            if not isinstance(calls, list):
                continue
            if len(calls) == 0:
                msg.pop("tool_calls", None)
                continue
            for item in calls:
                if args := item["function"].get("arguments"):
                    if not isinstance(args, (dict, list)):
                        item["function"]["arguments"] = json.loads(args)
                else:
                    item["function"]["arguments"] = {}
    return out


def vllm_render(src, req, add_generation_prompt, special_tokens):
    messages = vllm_messages(req["messages"], vllm_content_format(src))
    tools = None if req.get("tools") is None else [VllmTool.model_validate(t).model_dump() for t in req["tools"]]
    # ChatCompletionRequest.build_chat_params: the request's own fields are merged over
    # chat_template_kwargs unless None (vllm/renderers/params.py, merge_kwargs).
    own = dict(add_generation_prompt=add_generation_prompt, continue_final_message=False, documents=None, reasoning_effort=None)
    kwargs = (req.get("kwargs") or {}) | {k: v for k, v in own.items() if v not in (None, "auto")}
    return apply_chat_template(src, messages, special_tokens, tools=tools, **kwargs)


# --- SGLang ----------------------------------------------------------------------------


class SgTextPart(BaseModel):
    type: Literal["text"]
    text: str


class SgFunctionResponse(BaseModel):
    name: Optional[str] = None
    arguments: Optional[Union[str, Dict[str, Any]]] = None


class SgToolCall(BaseModel):
    id: Optional[str] = None
    index: Optional[int] = None
    type: Literal["function"] = "function"
    function: SgFunctionResponse


class SgGenericMessage(BaseModel):
    role: Literal["system", "assistant", "tool", "function"]
    content: Union[str, List[SgTextPart], None] = Field(default=None)
    tool_call_id: Optional[str] = None
    name: Optional[str] = None
    reasoning_content: Optional[str] = None
    tool_calls: Optional[List[SgToolCall]] = None

    @field_validator("role", mode="before")
    @classmethod
    def _normalize_role(cls, v):
        return v.lower()


class SgUserMessage(BaseModel):
    role: Literal["user"]
    content: Union[str, List[SgTextPart]]


class SgFunction(BaseModel):
    description: Optional[str] = None
    name: Optional[str] = None
    parameters: Optional[object] = None
    strict: bool = False


class SgTool(BaseModel):
    type: str = "function"
    function: SgFunction


def sglang_message(raw):
    return SgUserMessage.model_validate(raw) if raw["role"] == "user" else SgGenericMessage.model_validate(raw)


def sglang_render(src, req, add_generation_prompt, special_tokens):
    content_format = sglang_content_format(src)
    messages = []
    for message in map(sglang_message, req["messages"]):
        if message.content is None:
            message.content = ""
        msg = message.model_dump()
        if not isinstance(msg.get("content"), list):
            msg = {k: v for k, v in msg.items() if v is not None}
        elif content_format == "string":
            texts = [c["text"] for c in msg["content"] if isinstance(c, dict) and c.get("type") == "text"]
            msg["content"] = " ".join(texts) if texts else ""
            msg = {k: v for k, v in msg.items() if v is not None}
        else:
            msg = {k: v for k, v in msg.items() if v is not None}
        if msg["role"] == "assistant" and isinstance(msg.get("tool_calls"), list):
            for item in msg["tool_calls"]:
                if "arguments" in item["function"] and isinstance(item["function"]["arguments"], str):
                    item["function"]["arguments"] = json.loads(item["function"]["arguments"])
        messages.append(msg)
    # _handle_last_assistant_message: a final assistant message with string content becomes a
    # user turn of that content, or with continue_final_message is cut and appended as text.
    prefix = ""
    if messages and messages[-1].get("role") == "assistant" and isinstance(messages[-1].get("content"), str):
        if req.get("continue_final_message"):
            prefix = messages.pop()["content"]
        else:
            messages[-1] = {"role": "user", "content": messages[-1]["content"]}
    tools = None
    if req.get("tools"):
        tools = [SgTool.model_validate(t).function.model_dump() for t in req["tools"]]
    # ChatCompletionRequest.normalize_reasoning_inputs (protocol.py, commit 004c82e0): a
    # top-level reasoning_effort sets thinking/enable_thinking unless the kwargs have them;
    # the kwargs' reasoning_effort replaces the request's; it is passed only when set.
    kwargs = dict(req.get("kwargs") or {})
    effort = kwargs.pop("reasoning_effort", None)
    if req.get("reasoning_effort") is not None:
        kwargs.setdefault("thinking", req["reasoning_effort"] != "none")
        kwargs.setdefault("enable_thinking", req["reasoning_effort"] != "none")
        if effort is None:
            effort = req["reasoning_effort"]
    extra = {"reasoning_effort": effort} if effort is not None else {}
    # SGLang always asks for the generation prompt, whatever the request says.
    return apply_chat_template(src, messages, special_tokens, tools=tools, add_generation_prompt=True, **extra, **kwargs) + prefix


# --- cases -----------------------------------------------------------------------------

WEATHER_TOOLS = """[
 {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.",
  "parameters": {"type": "object", "required": ["city"], "properties": {
   "city": {"type": "string", "description": "City name, e.g. Paris"},
   "unit": {"enum": ["celsius", "fahrenheit"], "type": "string"},
   "when": {"type": "object", "properties": {"day": {"type": "integer", "minimum": 0, "maximum": 6}, "hour": {"type": "integer"}}, "required": ["day"]},
   "tags": {"type": "array", "items": {"type": "string", "maxLength": 32}}}}}},
 {"type": "function", "function": {"name": "search", "description": "Search the web <fast> & \\"cheap\\".",
  "parameters": {"properties": {"query": {"type": "string"}, "limit": {"default": 5, "type": "integer"}}, "type": "object"}}}
]"""

# Keys deliberately out of alphabetical order at every level, and no description.
ORDER_TOOLS = """[{"function": {"parameters": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}, "mid": {"type": "object", "properties": {"y": {"type": "boolean"}, "b": {"type": "null"}}}}, "required": ["zeta", "alpha"]}, "name": "ordered"}, "type": "function"}]"""

QWEN3 = "testdata/tokenizers/qwen3/tokenizer_config.json"
LLAMA3 = "testdata/tokenizers/llama3/tokenizer_config.json"

# A template that refuses some conversations, as Mistral's and Gemma's do.
ALTERNATE = (
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{{ '[' + message['role'] + '] ' + message['content'] + '\\n' }}"
    "{% endfor %}"
)

# A template that loops over content parts: both engines hand it parts ("openai" format).
PARTS = (
    "{% for message in messages %}{{ message.role }}:"
    "{% if message.content is string %}{{ message.content }}"
    "{% else %}{% for part in message.content %}[{{ part.type }}]{{ part.text }}{% endfor %}{% endif %}"
    "{{ '\\n' }}{% endfor %}"
)

# gpt-oss's way with reasoning_effort (openai/gpt-oss-20b chat_template.jinja,
# build_system_message): a default of "medium" when the variable is undefined.
EFFORT = (
    "{%- if not reasoning_effort is defined %}{%- set reasoning_effort = 'medium' %}{%- endif %}"
    "{{ 'Reasoning: ' + reasoning_effort + '\\n' }}"
    "{% for message in messages %}{{ message.role }}: {{ message.content }}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)

CASES = [
    # name, config or inline source, add_generation_prompt, messages, tools, kwargs
    ("qwen3/system_user", QWEN3, True, '[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the capital of France?"}]', None, None),
    ("qwen3/user_only", QWEN3, True, '[{"role": "user", "content": "Hello"}]', None, None),
    ("qwen3/multi_turn_think", QWEN3, True, '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\\nAdd them.\\n</think>\\n\\n4"}, {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "<think>Easy.</think>6"}, {"role": "user", "content": "Thanks"}]', None, None),
    ("qwen3/enable_thinking_false", QWEN3, True, '[{"role": "user", "content": "Hi"}]', None, '{"enable_thinking": false}'),
    ("qwen3/enable_thinking_true", QWEN3, True, '[{"role": "user", "content": "Hi"}]', None, '{"enable_thinking": true, "unused_kwarg": [1, 2]}'),
    ("qwen3/tools_nested", QWEN3, True, '[{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "Weather in Paris tomorrow at 9?"}]', WEATHER_TOOLS, None),
    ("qwen3/tools_key_order", QWEN3, True, '[{"role": "user", "content": "Go"}]', ORDER_TOOLS, None),
    ("qwen3/tools_empty", QWEN3, True, '[{"role": "user", "content": "Go"}]', "[]", None),
    ("qwen3/tool_calls_object_args", QWEN3, True, '[{"role": "user", "content": "Weather in Paris and Rome?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}, {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"unit": "celsius", "city": "Rome"}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\\"temp\\": 21}"}, {"role": "tool", "tool_call_id": "call_2", "content": "{\\"temp\\": 25}"}, {"role": "assistant", "content": "Paris 21, Rome 25."}, {"role": "user", "content": "Thanks"}]', WEATHER_TOOLS, None),
    ("qwen3/tool_calls_string_args", QWEN3, True, '[{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\":\\"Paris\\",\\"when\\":{\\"hour\\":9,\\"day\\":1}}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]', WEATHER_TOOLS, None),
    ("qwen3/tool_call_with_text", QWEN3, False, '[{"role": "user", "content": "Search cats"}, {"role": "assistant", "content": "Let me search.", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "search", "arguments": "{\\"query\\": \\"cats\\", \\"limit\\": 3}"}}]}]', WEATHER_TOOLS, None),
    ("qwen3/content_parts", QWEN3, True, '[{"role": "system", "content": [{"type": "text", "text": "Be kind."}, {"type": "text", "text": "Be brief."}]}, {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]}]', None, None),
    ("qwen3/unicode_emoji", QWEN3, True, '[{"role": "system", "content": "Réponds en français 🇫🇷."}, {"role": "user", "content": "日本語は? 😀 \\u00e9 tab\\tnew\\nline"}]', '[{"type": "function", "function": {"name": "traduire", "description": "Traduit un texte — vers le 中文 🚀", "parameters": {"type": "object", "properties": {"texte": {"type": "string", "description": "«texte» à traduire"}}}}}]', None),
    ("qwen3/reasoning_content_field", QWEN3, False, '[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning_content": "Thought about Q."}]', None, None),
    ("qwen3/reasoning_field", QWEN3, False, '[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning": "Thought about Q."}]', None, None),
    ("qwen3/no_generation_prompt", QWEN3, False, '[{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}]', None, None),
    ("llama3/system_user", LLAMA3, True, '[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the capital of France?"}]', None, None),
    ("llama3/multi_turn", LLAMA3, True, '[{"role": "user", "content": "  Hi  \\n"}, {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell me a joke."}]', None, None),
    ("llama3/no_generation_prompt", LLAMA3, False, '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]', None, None),
    ("parts/openai_format", PARTS, True, '[{"role": "system", "content": "Plain."}, {"role": "user", "content": [{"type": "text", "text": "One"}, {"type": "text", "text": ""}, {"type": "text", "text": "Two"}]}, {"role": "assistant", "content": null}, {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}]}]', None, None),
    ("alternate/ok", ALTERNATE, True, '[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]', None, None),
    ("alternate/raise", ALTERNATE, True, '[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]', None, None),
    # Top-level request fields SGLang reads (a 7th element: the request's other keys),
    # rendered for SGLang only.
    ("qwen3/continue_final_message", QWEN3, True, '[{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn moon"}]', None, None, '{"continue_final_message": true}'),
    ("qwen3/reasoning_effort_none", QWEN3, True, '[{"role": "user", "content": "Hi"}]', None, None, '{"reasoning_effort": "none"}'),
    ("qwen3/reasoning_effort_kwargs_win", QWEN3, True, '[{"role": "user", "content": "Hi"}]', None, '{"enable_thinking": true}', '{"reasoning_effort": "none"}'),
    ("effort/default", EFFORT, True, '[{"role": "user", "content": "Hi"}]', None, None),
    ("effort/request", EFFORT, True, '[{"role": "user", "content": "Hi"}]', None, None, '{"reasoning_effort": "high"}'),
    ("effort/kwargs", EFFORT, True, '[{"role": "user", "content": "Hi"}]', None, '{"reasoning_effort": "low"}', '{"reasoning_effort": "high"}'),
]

ENGINES = {"vllm": vllm_render, "sglang": sglang_render}


def load_config(path):
    with open(f"{REPO}/{path}") as f:
        cfg = json.load(f)
    tokens = {}
    for key in ("bos_token", "eos_token"):
        tok = cfg.get(key)
        if isinstance(tok, dict):
            tok = tok.get("content")
        if tok is not None:
            tokens[key] = tok
    return cfg["chat_template"], tokens


def main():
    goldens = []
    for name, where, agp, messages, tools, kwargs, *rest in CASES:
        if where.endswith(".json"):
            src, tokens = load_config(where)
            origin = {"config": where}
        else:
            src, tokens = where, {"bos_token": "<s>", "eos_token": "</s>"}
            origin = {"source": where, "bos_token": "<s>", "eos_token": "</s>"}
        req = {"messages": json.loads(messages), "tools": json.loads(tools) if tools else None, "kwargs": json.loads(kwargs) if kwargs else None}
        if rest:
            req.update(json.loads(rest[0]))
        for engine, render in ENGINES.items():
            if rest and engine != "sglang":
                continue  # the request fields of these cases are SGLang's handling
            case = {"name": f"{name}/{engine}", **origin, "engine": engine, "add_generation_prompt": agp, "messages": messages}
            if tools is not None:
                case["tools"] = tools
            if kwargs is not None:
                case["kwargs"] = kwargs
            if rest:
                case["request"] = rest[0]
            try:
                case["want"] = render(src, json.loads(json.dumps(req)), agp, tokens)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            goldens.append(case)
    json.dump(goldens, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
