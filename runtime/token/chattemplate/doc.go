// Package chattemplate renders HuggingFace chat templates in Go to the same prompt the
// serving engine builds, so the router can count and hash the engine's exact tokens.
//
// # What the engines do
//
// Both vLLM and SGLang end in transformers' apply_chat_template, whose Jinja environment
// (src/transformers/utils/chat_template_utils.py, _compile_jinja_template) is an
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=
// [AssistantTracker, jinja2.ext.loopcontrols]) with tojson = json.dumps(ensure_ascii=False,
// sort_keys=False, …) and the globals raise_exception and strftime_now. The template gets
// messages, tools (None when absent), documents (None), add_generation_prompt, the special
// tokens (bos_token, eos_token; left undefined when null) and every chat_template_kwargs
// key as a top-level variable.
//
// Before that call each engine rebuilds the request, and the rebuilt values are what the
// template prints. Confirmed in upstream source:
//
//   - vLLM (vllm/entrypoints/chat_utils.py, _parse_chat_message_content and
//     _postprocess_messages; newer releases in vllm/renderers/chat_utils/): every message
//     is rebuilt as role and content, then, by role, tool_calls, reasoning and
//     reasoning_content (from the request's "reasoning"), tool_call_id, name, task and
//     tools; other keys are dropped. For templates that print
//     content as a string, text parts (text, input_text, output_text, refusal, thinking)
//     are joined with "\n", empty texts skipped, null content becomes "". For templates
//     that loop over content (vllm/renderers/hf.py, _detect_content_format, the "openai"
//     format), content is a list of {"type": "text", "text": …}, a plain string becoming
//     one part, except that a tool message's parts are joined into a string. JSON-string tool-call arguments are parsed into objects, missing ones
//     become {}, an empty tool_calls list is dropped. Tools are
//     [tool.model_dump() for tool in request.tools]: {"type", "function": {"name",
//     "description", "parameters", …extra keys}, …extra keys}, description and parameters
//     null when absent (chat_completion serving and engine/protocol.py).
//   - SGLang (python/sglang/srt/entrypoints/openai/serving_chat.py, _apply_jinja_template;
//     python/sglang/srt/jinja_template_utils.py, process_content_for_template_format):
//     null content becomes "", each message is its pydantic model dumped in field order
//     (role, content, tool_call_id, name, reasoning_content, tool_calls; a user message
//     only role and content) with null keys dropped. For string templates, the text parts
//     of an array are joined with a single space and other parts ignored; for templates
//     that loop over message/msg/m content, parts are kept, media reduced to
//     {"type": "image"|"video"|"audio"}. JSON-string arguments are parsed. Tools are only
//     the functions: [tool.function.model_dump()] = {"description", "name", "parameters",
//     "strict": false}, and None when the list is empty. add_generation_prompt is always
//     true, whatever the request says. A final assistant message with string content
//     becomes a user message of that content (or, with the request's
//     continue_final_message, is removed and its content appended to the rendered prompt).
//     reasoning_effort is passed only when the request sets it, at the top level or in
//     chat_template_kwargs (which wins); a top-level one also sets thinking and
//     enable_thinking (false for "none") unless chat_template_kwargs has them
//     (serving_chat.py at 002897c2, protocol.py at 004c82e0).
//
// So the same request gives different prompts on the two engines (content parts joined by
// "\n" or " ", tools with or without their {"type", "function"} wrapper), and Options.Engine
// says which one to reproduce. Keys the request orders itself (tool parameters, tool-call
// arguments) keep the request's order: values are built from the JSON token stream into
// ordered dicts, never Go maps.
//
// # Known differences
//
// The Jinja engine is github.com/ardanlabs/jinja v1.8.0 (v1.9+ need Go 1.27). It matches
// Python Jinja2 on the templates tested here (testdata/goldens.json), but differs where
// Jinja2 would print Python values or fail:
//
//   - floats print in Go's shortest form: 1.0 and 0.0 in a tool schema would render as 1
//     and 0 where json.dumps writes 1.0 and 0.0, and 1234567.0 as 1.234567e+06. A render
//     whose values hold such a float fails with ErrFloat (token.ErrUnpredictable): the
//     router serves the request counted approximately, without prefix hashes, rather than
//     hash a prompt the engine does not build;
//   - none prints as "" rather than "None";
//   - undefined values are lenient: attributes of undefined and undefined + "x" do not
//     fail as Jinja2's do, so SGLang's retry with {"function": tool} wrapped tools after a
//     failed first render is not reproduced;
//   - tojson(indent=…) encodes with sorted keys (Check reports it as ErrUnfaithful);
//   - dict and list methods may mutate values, where the sandbox refuses;
//   - strftime_now knows only %Y %m %d %H %M %S %B %b %A %a %p %I %Z and %%.
//
// Not reproduced either: vLLM's interleaving of multimodal placeholders (ErrMultimodal is
// returned instead), tool_choice (SGLang drops tools for "none" and filters them for a
// named tool; pass the tools the engine would see), and SGLang's newer message fields.
package chattemplate
