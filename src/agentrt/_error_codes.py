# ruff: noqa: E501
# (one line per code reads best as a table, whatever its length)
"""The registry's data: every stable code, by family, with its one-line meaning.

One line per code: ``code | what it means | what to do`` (the last part may be
left out; the family's advice applies then).  A code with a ``<hole>`` stands for
a family of codes (``provider_http_<status>``: ``provider_http_404``...).
``agentrt.errors`` parses this into :data:`agentrt.errors.CODES`; docs/errors.md
is generated from it (``tools/error_codes.py write``), and a test fails when a
code produced anywhere in the sources is missing here.
"""

from __future__ import annotations

__all__ = ["TABLES"]

LAUNCH = """
acp_auth_required | the ACP agent needs its user to log in first | log in with the agent's own CLI, then retry
cli_executable_not_found | the agent's executable is not set or does not exist | set AWP_AGENT_CLI_EXECUTABLE (or the agent's `executable`) to an existing absolute path
cli_executable_must_be_absolute | the agent's executable is given as a relative path | give an absolute path
cli_executable_is_symlink | the agent's executable is a symbolic link (refused so the checked file is the one run) | point at the real file (`readlink -f`)
cli_executable_not_regular_file | the agent's executable is a directory, device or other non-regular file | point at the program file itself
cli_executable_not_executable | the agent's executable lacks the execute permission for this user | `chmod +x` it or pick another file
invalid_cli_args_json | the agent's extra arguments are not a JSON array of at most 256 strings | fix AWP_AGENT_CLI_ARGS_JSON / the `args` setting
invalid_cli_env_json | the agent's environment entries are not a JSON object (or mapping) of strings | fix AWP_AGENT_CLI_ENV_JSON / the `env` mapping
invalid_cli_env_entry | an environment entry has an invalid name or a value with NUL | use names like `FOO_BAR` and plain-text values
cli_env_too_large | more environment entries than the launch contract allows | pass fewer entries
cli_env_value_too_large | an environment value is longer than the launch contract allows | shorten the value
invalid_cli_protocol | the protocol name is not one a dialect plugin could register | use a dialect name listed by `agentrt plugins`
invalid_model | the model name is too long or has control characters | fix the model name
invalid_working_directory | the working directory is empty or not a usable path | give an existing directory
remote_api_requires_explicit_opt_in | an environment entry holds a remote URL and remote APIs were not allowed | set AWP_AGENT_REMOTE_API_OPT_IN=1 if the remote API is intended
spawn_failed | the operating system refused to start the agent process | check the executable, its interpreter line and the working directory
stdin_unavailable | the agent's stdin is closed, so the prompt could not be sent | the agent exited or closed stdin; see its stderr
unknown_preset | no preset with that name | pick one from `agentrt agents add --help`
preset_dependency_not_found | a preset needs a program that is not on PATH | install the named program
unknown_agent | no agent with that name in the config file | add it with `agentrt agents add` or fix the name
agent_exists | an agent with that name is already in the config file | pass --replace or choose another name
continued_agent_removed | the conversation to continue used an agent that is no longer configured | add the agent back or start a new conversation
fastagent_binary_not_found | the FastAgent binary does not exist | set FASTAGENT_BINARY_PATH to the installed binary
fastagent_binary_not_absolute | the FastAgent binary path is relative | give an absolute path
fastagent_binary_is_symlink | the FastAgent binary is a symbolic link | point at the real file
fastagent_binary_not_regular_file | the FastAgent binary is not a regular file | point at the program file
fastagent_binary_not_executable | the FastAgent binary is not executable | `chmod +x` it
fastagent_start_failed | a FastAgent bot could not be started | read the bot's detail; install or point at the FastAgent CLI
local_model_unavailable | the local model is not installed | run the install command the detail prints
local_model_server_exited | the local model server exited while starting | read the server output in the detail
local_model_server_crashed | the local model server ended by itself during a run | read the server output; restart
local_model_server_not_ready | the local model server did not answer in time | check memory and CPU; try again
"""

PROTOCOL = """
acp_<method>_failed | the ACP agent refused a handshake request (`acp_session_new_failed`, `acp_session_load_failed`...) | read the agent's message; check its options and login
rpc_error | the ACP agent answered with a JSON-RPC error of no standard code | read the agent's message
rpc_parse_error | the ACP agent could not parse what agentrt sent (JSON-RPC -32700) | report it, with the agent's version
rpc_invalid_request | the ACP agent called agentrt's request invalid (JSON-RPC -32600) | report it, with the agent's version
rpc_method_not_found | the ACP agent does not implement a method agentrt called (JSON-RPC -32601) | upgrade the agent
rpc_invalid_params | the ACP agent refused a request's parameters (JSON-RPC -32602) | read the agent's message
rpc_internal_error | the ACP agent failed internally (JSON-RPC -32603) | read the agent's message and its log
resource_not_found | a resource (a session, a file) does not exist: the ACP agent says so (JSON-RPC -32002), or agentrt answers an agent's file request so | check the session id or path
protocol_mismatch | the agent wrote nothing the configured dialect recognises within the first-output bound | check the agent's protocol setting (`agentrt check`)
malformed_output_line | a line of the agent's stdout is not valid JSON (it is skipped) | a bug or debug print in the agent; see the line's head in the detail
unexpected_output_shape | a JSON message of the agent does not have the shape its protocol requires (it is skipped) | report it to the agent's maintainers; the raw object is kept
unexpected_response | the agent answered a request agentrt never sent | report it to the agent's maintainers
unknown_session | the agent sent an update for a session other than the conversation's | report it to the agent's maintainers
unknown_stop_reason | the agent ended the turn with a stop reason ACP does not define | report it to the agent's maintainers
unsupported_protocol_version | the ACP agent speaks a protocol version agentrt does not | upgrade the agent or agentrt
acp_initialize_failed | the ACP agent refused the initialize handshake | read the agent's message; check its login and options
resume_unsupported | the agent cannot load an earlier session | start a new conversation instead of resuming
unsupported_content_block | the agent does not accept this kind of content (e.g. images) | send text only
model_not_set | the ACP agent did not accept the requested model, or does not offer it (the message names those it offers) | pick a model the agent lists
mode_not_set | the ACP agent did not accept the mode chosen for the session | pick a mode the agent lists
session_open_timeout | the bridge's hosted ACP agent did not open its session (or answer a forwarded switch) within its bound | raise the agent's `first_output_timeout` for a slow start; check its protocol setting
session_not_open | a model or mode switch came while the bridge's hosted ACP agent had no open session (its process was replaced) | send a prompt first, then switch
invalid_control_request | a control request or response lacks its id | report it to the agent's maintainers
invalid_control_response | a control response could not be read | report it to the agent's maintainers
invalid_tool_input_json | a streamed tool input is not valid JSON | report it to the agent's maintainers
stream_text_mismatch | a complete message differs from the text streamed before it | report it to the agent's maintainers; the complete text is kept
output_before_input | the agent wrote events before it was sent any input | report it to the agent's maintainers
duplicate_terminal_event | the agent ended a turn that had already ended (the extra end is ignored) | report it to the agent's maintainers
invalid_session_id | the agent reported a session id of the wrong shape | report it to the agent's maintainers
session_id_changed | the agent reported a different session id mid-conversation (the first is kept) | report it to the agent's maintainers
fastagent_invalid_line | a FastAgent output line is not a valid lifecycle event | check the FastAgent version
fastagent_invalid_output | a FastAgent bot wrote output that is not its protocol | check the FastAgent version and the bot's log
fastagent_stdout_held | a FastAgent bot kept its stdout open after exiting | a child of the bot holds stdout; check the bot's tools
fastagent_pid_claim_ignored | a FastAgent bot claimed a process id agentrt did not start (ignored) | none; agentrt signals only its own processes
invalid_lifecycle_event | a FastAgent lifecycle event has invalid fields | check the FastAgent version
invalid_qr_url | a bot's QR login URL was refused (not https or not printable) | check the bot's channel settings
invalid_input_message | an input line is not a message the agent accepts | send one JSON message per line in the agent's protocol
invalid_input_content | an input message's content is neither text nor content blocks | send a string or an array of content blocks
empty_input_content | an input message has no usable content | send some text
invalid_input_json | an input line is not JSON | send one JSON object per line
input_message_oversize | an input line exceeds the size limit | send a shorter message
unsupported_input | the dialect reads no input on stdin | drive this agent through its own interface
missing_argument_value:<arg> | a bridge argument needs a value that was not given | pass the value after the flag
unsupported_argument:<arg> | the bridge does not support this command-line argument | drop the argument
unsupported_mode:<mode> | the test kit's fixture agent was given a mode it does not have | use a mode the fixture documents
output_closed | the output (stdout or a pipe) was closed while writing | the reader went away; nothing to do
"""

TURN = """
cc_error | the Claude-Code-style agent reported a failed result with no more precise reason | read the turn's message
cc_<subtype> | the Claude-Code-style agent's failed result, by its subtype (`cc_error_max_turns`...) | read the turn's message
max_tokens | the ACP agent stopped the turn at its token limit | ask for less, or raise the agent's limit
max_turn_requests | the ACP agent stopped the turn at its limit of model requests | simplify the task, or raise the agent's limit
refusal | the ACP agent refused to continue the turn | rephrase the prompt
turn_in_progress | a turn was sent while the previous one had not ended | wait for the terminal event, or close the turn first
turn_cancelled | the turn was cancelled (by the caller, Ctrl-C or the agent) | none; send the next turn
turn_interrupted | the agent's turn was interrupted on request | none; send the next turn
turn_timeout | no result within the caller's time bound (`agentrt run --timeout`) | raise the bound or simplify the prompt
exit_before_result | the agent exited before it reported a result | read the agent's stderr (`agentrt logs`)
turn_unfinished | the turn's recording ended before the turn did (its agentrt process was killed, the machine stopped, or recording failed); closed on the next open of the database with the reply its transcript kept | send the prompt again
session_exited | the conversation was stopped while a turn was in flight | open a new conversation
runtime_output_oversize | an agent's output line exceeded 4 MiB; the agent was stopped | a bug in the agent; report it
owner_hook_failed | a host's own policy (a `ProcessOwner` hook) raised while its agent process ran; that process was stopped | a bug in the host; the error's cause says which hook and why
agent_internal_error | the reference agent failed in an unexpected way | report it with the agent's log
managed_tool_call_limit | the model made more tool calls in one turn than allowed | simplify the task
managed_tool_round_limit | the model gave no final answer within the allowed provider rounds | simplify the task
prompt_missing | no prompt was given on the command line or stdin | give PROMPT or pipe it on stdin
prompt_empty | the prompt read from stdin is empty | pipe a non-empty prompt
prompt_too_large | the prompt on stdin exceeds the size limit | send a shorter prompt
prompt_too_long | a chat message exceeds the web UI's length limit | send a shorter message
empty_prompt | a chat message is empty | type a message
approval_closed | the approval was answered after its turn ended | none; the turn already ended
unknown_event_type | an event's JSON form names a type this agentrt does not know | upgrade agentrt to read newer records
no_conversation | there is no recorded conversation to continue | start one first
"""

CONFIG = """
unsupported_argument | the reference agent was given a command-line argument it does not take | see `agentrt agent --help`
config_invalid | the config file cannot be read or has an invalid setting | fix the line the detail names
conflicting_options | two options that exclude each other were given | drop one of them
missing_option | a required option was not given | add the option the detail names
usage_error | options were combined in a way the command does not accept | see the command's --help
invalid_env_option | an --env value does not look like KEY=VALUE | write it as KEY=VALUE
plugin_missing | the option needs a plugin that is not installed | install the plugin the detail names
invalid_first_output_timeout | AGENTRT_FIRST_OUTPUT_TIMEOUT is not a number of seconds | set seconds, or 0 for no bound
invalid_resume_session_id | the session id to resume has the wrong shape | pass an id matching `[A-Za-z0-9._:-]{1,256}`
invalid_tool_pattern | an approval rule's tool pattern is invalid | see docs/approval.md for the pattern syntax
invalid_acp_fs | AGENTRT_ACP_FS is not off, read or write | set one of those values
invalid_acp_mcp_servers | AGENTRT_ACP_MCP_SERVERS_JSON is not an array of objects | fix the JSON
invalid_agentrt_timeout_ms | AGENTRT_TIMEOUT_MS is out of range (1000..600000) | set a value in range
invalid_state_directory | AGENTRT_STATE_DIR is not an absolute path | give an absolute path
invalid_system_prompt | AGENTRT_SYSTEM_PROMPT is too long or contains NUL | shorten it
model_required | the reference agent was started without a model | pass --model or set AGENTRT_MODEL
web_token_required | the web server binds a non-loopback address without a token or password | set AGENTRT_WEB_TOKEN or AGENTRT_WEB_PASSWORD
web_token_too_short | the web token or password is too short | use at least 8 characters
bad_request | a web request's body is not what the endpoint expects | send a JSON object
not_found | a web request asks for an address where there is nothing | check the URL (the web UI links only to what exists)
unknown_action | a web request names an action that does not exist | use one of the documented actions
address_in_use | the port to listen on is already in use | pick another port or stop the other server
address_not_available | the address to listen on does not exist on this machine | bind an address of this machine
bots_config_invalid | the bots config file has an invalid setting | fix the setting the detail names
invalid_bot_id | a bot id has invalid characters or length | use 1-64 letters, digits, `_`, `.`, `-`
llm_profile_invalid | a bot's LLM profile has blank fields | fill in the fields the detail names
llm_profile_required | a bot has no LLM profile bound | bind a profile with `agentrt bots`
sandbox_config_invalid | a bot's sandbox mode is unknown | use a documented sandbox mode
invalid_lease_ttl | the bot lease TTL is not a positive number of seconds | set a positive number
lease_ttl_too_short | the bot lease TTL is too short for the bot stop time | use at least the value the detail gives
invalid_max_bots | --max-bots is negative | give 0 or more
invalid_node_name | a node name is empty, too long or contains `#` | use 1-200 printable characters without `#`
invalid_supervisor_config | the bot supervisor's settings are invalid | fix the setting the detail names
placement_required | bots shared between hosts need the Redis supervisor | run `agentrt bots supervise --redis`
no_qr_code | the bot is not waiting for a QR login | check the bot's status
unknown_bot | no bot with that name | add it with `agentrt bots add`
bot_not_stopped | the bot must be stopped first | stop the bot, then retry
supervisor_already_running | another supervisor manages the same bots directory | use the running supervisor
supervisor_unavailable | the action needs the bot supervisor in this server | run the web server with the supervisor
no_retention_limit | log pruning was asked for without a limit | set [logs] max_age_days or max_size_mb, or pass the options
"""

PLUGIN = """
plugin_load_failed | a plugin's entry point raised when imported | fix or uninstall the plugin (`agentrt plugins`)
invalid_plugin_registration | a plugin registered a name that is not a valid name | fix the plugin
duplicate_registration | two plugins register the same name for the same kind | uninstall one, or disable it with AGENTRT_DISABLE_PLUGINS
ambiguous_sink_role | two installed sinks hold the same role and none was chosen | pick one as the detail says (`--sink NAME`), or disable one with AGENTRT_DISABLE_PLUGINS
unknown_sink | a sink was chosen by a name no loaded sink has | pick a name `agentrt plugins` lists
sink_role_mismatch | the sink chosen for a role holds another role | choose a sink of that role
conflicting_sink_choice | two sinks of the same role were chosen | give one `--sink` per role
unknown_hook | a plugin implements a hook agentrt does not define | upgrade agentrt or fix the plugin's hook name
unknown_plugin_kind | `agentrt plugin new` was given a kind it cannot write | use dialect, provider, tool or sink
invalid_plugin_name | `agentrt plugin new` was given a name that is not lower-case words joined by `-` or `_` | use a name such as acme-notes (at most 48 characters)
plugin_name_taken | `agentrt plugin new` was given a name an installed plugin already registers | pick another name (`agentrt plugins` lists the taken ones)
plugin_dir_not_empty | `agentrt plugin new` would write into a directory that is not empty (or a file) | give a new or empty directory
plugin_write_failed | `agentrt plugin new` could not create a directory or write a file of the package | check the path and its permissions
recorder_failed | the recording sink failed; the conversation goes on unrecorded | check the database (disk, permissions)
"""

STORE = """
sink_failed | a sink raised on a batch of events; it still gets later batches | check what the sink writes to (the detail names the sink)
sink_detached | a sink failed on several batches in a row and was detached; the conversation goes on | check the sink's target, then start a new conversation
database_unavailable | the database file cannot be opened | check the path and its permissions
database_timeout | the database did not answer in time (locked by another writer) | retry; check for a stuck process
database_too_new | the database was written by a newer agentrt | upgrade agentrt
database_sink_failed | the database sink could not start | check the database path and permissions
invalid_database_url | AGENTRT_DATABASE_URL is not a `sqlite:///abs/path.db` URL | fix the URL
unsupported_database_url | the database URL's scheme is not supported | use sqlite:///abs/path.db
sink_closed | an event was written to a sink that was already closed | none; the conversation has ended
sink_close_timeout | the sink's writer did not finish in time when closing | check the disk; some events may be missing
sink_write_failed | the sink could not write an event | check the disk and permissions
thread_store_unavailable | a thread was asked for but no thread store plugin is installed | install agentrt-sqlite
thread_exists | a thread with that name already exists | choose another name
invalid_thread_name | a thread name is empty, too long or not printable | use 1 to 256 printable characters
unknown_thread | no thread with that name or id | check the name (`agentrt logs`)
thread_delete_unsupported | the thread store cannot delete threads | use a store that can
thread_rename_unsupported | the thread store cannot rename threads | use a store that can
redis_client_missing | Redis support needs the coredis package | `pip install coredis`
redis_url_invalid | a Redis URL does not start with redis://, rediss:// or unix:// | fix the URL
redis_timeout_invalid | a Redis timeout is not a positive number of seconds | fix the setting
redis_unavailable | Redis did not answer | check that the server runs and is reachable
redis_auth_failed | Redis refused the credentials | check the user and password in the URL
redis_handshake_refused | Redis refused the handshake (it must be Redis 6 or later) | upgrade Redis
bot_store_unavailable | no plugin provides a bot store | install agentrt-fastagent's store
bot_store_busy | a bot's record kept changing while being updated | retry
bot_store_corrupt | a bot's stored record cannot be read | remove or repair the record
bot_store_failed | Redis refused a bot store script | check the Redis server version and its log
fencing_refused | this node no longer holds the bot's lease | none; another node took the bot over
session_busy | another process held the agent's session for too long | wait, or stop the other process
session_state_oversize | the agent's session file is larger than allowed | start a new session
session_state_write_failed | the agent's session file could not be written | check the state directory's disk and permissions
session_state_identity_changed | the session file changed while it was open | retry; another process edits it
unsafe_session_state_directory | the state directory is not a plain directory | point AGENTRT_STATE_DIR at a real directory
unsafe_session_state_permissions | the state directory or file has unsafe ownership or mode | make it the user's, mode 0700/0600
unsafe_session_state_target | the session file is not a regular file | remove whatever is at that path
invalid_session_state | the session file has the wrong version or session id | start a new session
invalid_session_messages | the session file's messages are not a list of at most 100 | start a new session
invalid_session_message | a message in the session file is not an object | start a new session
invalid_session_role | a message in the session file has a role other than user or assistant | start a new session
invalid_session_content | a message in the session file has content of the wrong type | start a new session
"""

PROVIDER = """
provider_request_failed | the reference agent's provider call failed with no more precise code | read the turn's message; retry
api_error_<status> | the Claude-Code-style agent's model API answered with this HTTP status | 401/403: log the agent in again; 429: retry later; 5xx: the API failed
provider_unavailable | no provider plugin with that name is loaded | install the provider plugin (e.g. agentrt-openai)
provider_timeout | the provider did not finish within AGENTRT_TIMEOUT_MS | raise AGENTRT_TIMEOUT_MS or retry
provider_connection_failed | the provider's endpoint could not be reached | check the URL and the network
provider_tls_failed | the provider's TLS certificate could not be verified | fix the certificate or the URL
provider_redirect_rejected | the provider answered with a redirect (not followed) | use the final URL
provider_http_<status> | the provider answered with this HTTP error status | 401/403: check the token; 429: retry later; 5xx: the provider failed
provider_request_invalid | the request could not be encoded | report it with the detail
provider_response_invalid_json | the provider's response is not a JSON object | check the endpoint is an OpenAI-compatible API
provider_response_oversize | the provider's response is larger than allowed | report it to the provider
provider_returned_error | the provider reported an error in its response | read the detail
provider_returned_empty_text | the provider returned no text | retry or pick another model
provider_text_oversize | the provider's reply text is larger than allowed | ask for a shorter answer
provider_stream_interrupted | the provider's streamed response broke off | retry
provider_stream_malformed | a streamed event is not a JSON object | check the endpoint is an OpenAI-compatible API
provider_stream_truncated | the stream ended without a finish reason | retry
provider_requested_unavailable_tool | the model called a tool that was not offered | retry or pick another model
provider_tool_arguments_invalid_json | the model's tool arguments are not JSON | retry or pick another model
provider_tool_arguments_oversize | the model's tool arguments are larger than allowed | retry
provider_tool_call_id_duplicate | the model repeated a tool call id | retry or pick another model
provider_tool_call_id_invalid | a tool call id has an invalid shape | retry or pick another model
provider_tool_name_invalid | a tool call names an invalid tool | retry or pick another model
invalid_api_base_url | the API base URL lacks a scheme or a host | fix AGENTRT_API_BASE_URL
api_base_url_must_not_contain_credentials_query_or_fragment | the API base URL carries credentials, a query or a fragment | put the token in AGENTRT_API_TOKEN
invalid_api_token | the API token is too long or has whitespace or control characters | fix AGENTRT_API_TOKEN
invalid_local_api_protocol | a loopback API URL uses a scheme other than http or https | use http or https
remote_api_requires_https | a non-loopback API must use https | use an https URL
"""

TOOL = """
path_outside_cwd | an ACP agent's file request points outside the session's working directory (refused) | none; the agent may only touch files under the working directory
invalid_path | an ACP agent's file request has an empty, relative or symbolic-link path (refused) | none; report it if the agent keeps doing it
not_regular_file | an ACP agent's file request names a FIFO, socket, device or directory (refused, never opened blocking) | none; only regular files are read or written
file_too_large | an ACP agent's file read or write exceeds the size limit (4 MiB) | raise `AcpOptions.max_file_bytes` if needed
invalid_params | an ACP agent's file write has content that is not a string | report it to the agent's maintainers
file_error | an ACP agent's file request failed in the operating system (permissions, disk) | check the file's permissions and the disk
managed_tasks_require_explicit_opt_in | managed-task settings are present but the opt-in is not set | set the opt-in variable to 1
managed_tasks_configuration_incomplete | the managed-task settings are incomplete | set the variables the detail names
managed_task_arguments_invalid | a managed-task call has arguments other than argv and timeout_seconds | pass only argv and timeout_seconds
managed_task_argv_invalid | a managed-task argv is empty, too long or not a bare command | pass 1..32 strings, argv[0] a command name
managed_task_argv_oversize | a managed-task argv exceeds 64 KiB | pass shorter arguments
managed_task_timeout_invalid | a managed-task timeout is out of range | give 1 to 300 seconds
invalid_control_plane_url | the control-plane URL lacks a scheme or a host | fix the URL
invalid_control_plane_protocol | a loopback control plane uses a scheme other than http or https | use http or https
invalid_control_plane_path | a control-plane path was refused | report it
invalid_control_plane_token | the control-plane key has the wrong length or characters | use 16..4096 visible characters
invalid_control_plane_ca_file | the control-plane CA file is not an absolute path | give an absolute path
invalid_control_plane_setting | a control-plane setting is out of range | fix the setting the detail names
invalid_control_plane_response | the control plane's response is not an object | check the control plane's version
invalid_control_plane_task_id | the control plane returned an invalid task id | check the control plane's version
invalid_control_plane_task_status | the control plane returned an unknown task status | check the control plane's version
invalid_managed_task_poll_interval | the managed-task poll interval is out of range | set 10..5000 ms
remote_control_plane_requires_https | a remote control plane must use https | use an https URL
remote_control_plane_requires_explicit_opt_in | a remote control plane needs its opt-in | set the opt-in variable to 1
control_plane_unreachable | the control plane could not be reached (nothing was sent) | check the URL and that the server runs
control_plane_timeout | the control plane did not answer in time | retry; the request may have been applied
control_plane_transport_error | the control-plane connection failed mid-request | retry; the request may have been applied
control_plane_redirect_rejected | the control plane answered with a redirect (not followed) | use the final URL
control_plane_http_<status> | the control plane answered with this HTTP error status | 401: check the key; 5xx: see the server's log
control_plane_response_not_json | the control plane did not answer JSON | check the URL points at the control plane
control_plane_response_oversize | the control-plane response is larger than allowed | check the control plane's version
control_plane_api_key_missing | the control plane was started without an API key | set the key variable or key file
control_plane_api_key_unreadable | the control-plane key file cannot be read | check the path and permissions
weak_control_plane_api_key | the control-plane key is too short | use at least 16 visible bytes
control_plane_bind_not_loopback | the control plane binds a non-numeric or non-loopback address | bind a numeric loopback address
control_plane_storage_unavailable | the control plane's storage cannot be opened | check the path or Redis URL
conflicting_storage_options | two storage options were given for the control plane | give only one
incomplete_tls_options | only one of the TLS certificate and key was given | give both
worker_allowlist_empty | the worker was started with no allowed commands | give at least one --allow EXECUTABLE
invalid_allowed_command | an allowed command is not a bare executable name | give a name such as `make`
worker_command_not_found | an allowed command is not on the trusted PATH | install it or extend the trusted PATH
invalid_trusted_path | the trusted PATH lists a relative directory | list absolute directories
invalid_pass_env | an environment variable cannot be passed to commands | drop it from --pass-env
invalid_worker_output_cap | the worker's output cap is out of range | give 1..1048576 bytes
invalid_worker_slots | --slots is out of range | give 1..64
trusted_task_execution_requires_opt_in | the worker runs commands unsandboxed and the opt-in is not set | set the opt-in variable to 1 to accept that
worker_registration_refused | the control plane refused the worker's registration | check the key and the control plane's log
"""

#: Family name (a class in ``agentrt.errors``) and its table.
TABLES: tuple[tuple[str, str], ...] = (
    ("LaunchError", LAUNCH),
    ("ProtocolError", PROTOCOL),
    ("TurnError", TURN),
    ("ConfigError", CONFIG),
    ("PluginError", PLUGIN),
    ("StoreError", STORE),
    ("ProviderError", PROVIDER),
    ("ToolError", TOOL),
)
