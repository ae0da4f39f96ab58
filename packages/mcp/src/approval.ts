/**
 * Approvals over MCP elicitation: a tool whose policy has `approval` asks the user, through the
 * client, before it runs; the answer is stored with core's approvals, bound to the exact call.
 * Accept: approved, the tool runs once; decline: a stored rejection; cancel (or no answer):
 * nothing decided, the next call asks again. 2025-11-25 and before ask with a push-style
 * `elicitation/create` during the call; 2026-07-28 with an `input_required` result the client
 * answers by retrying the call (`inputResponses`, keyed by the approval key).
 */
import { type AskApproval, ConfigurationError } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import type { Capabilities, McpServerLike, Session, ToolCallInfo, ToolExtra } from './sdk.js';
import { sessionOf, takesForm } from './sdk.js';

/**
 * The `approval` of a tool's policy: ask the user through elicitation before it runs. `by`
 * defaults to the MCP client: "mcp-client <OAuth client id or client name> session=<id>";
 * `timeout` is how long a push-style elicitation (2025-11-25 and before) waits.
 */
export type McpApprovalPolicy = kit.AskingApprovalPolicy<ToolCallInfo>;

/** `true` (ask with the defaults), or how to ask. */
export type McpApprovalOption = boolean | McpApprovalPolicy;

/**
 * The policy of one MCP tool: its outcome is the tool's `CallToolResult`; `approval` asks the user
 * through MCP elicitation (see the README's "Approvals"); `repeatable` gives the tool's
 * `inputSchema` the `repeat` argument (deliberate repeats, see the README).
 */
export type McpToolPolicy = kit.AskingToolPolicy<
  Record<string, unknown>,
  kit.ContentResult,
  ToolCallInfo
>;

/** The `inputRequests` key (2026-07-28) of an approval: this prefix and the approval key. */
export const APPROVAL_INPUT_PREFIX = 'io.idempotent-tools/approval:';

/** What MCP fills in of a tool's `approval`: the call's arguments, the client who decides. */
export const approvalSpec: kit.AskingApprovalSpec<ToolCallInfo> = {
  args: (call) => call.args,
  by: (call) => {
    const who = `mcp-client ${call.authInfo?.clientId ?? call.clientName ?? 'unknown'}`;
    return call.sessionId === undefined ? who : `${who} session=${call.sessionId}`;
  },
};

/**
 * A process warning (once per client name) when a client that cannot be asked connects to a
 * server with approval tools. Only a 2025-era connection says so at `initialize`.
 */
export function watchCapabilities(server: McpServerLike, tools: string[], caller: string) {
  const inner = sessionOf(server);
  if (typeof inner?.getClientCapabilities !== 'function') return;
  const previous = inner.oninitialized;
  inner.oninitialized = () => {
    previous?.();
    const name = inner.getClientVersion?.()?.name ?? 'unknown';
    if (takesForm(inner.getClientCapabilities?.())) return;
    kit.warnOnce(
      'IDEMPOTENT_TOOLS_NO_ELICITATION',
      name,
      `${caller}: the MCP client "${name}" did not declare the elicitation capability, so ${tools.join(', ')} (approval: true) cannot ask the user and every call of them is refused. Use a client that supports form elicitation.`,
    );
  };
}

/** The push-style elicitation of a call (2.x `ctx.mcpReq.elicitInput`, 1.x `server.elicitInput`). */
function pushElicitation(server: McpServerLike, extra: ToolExtra, timeout: number) {
  const signal = extra.mcpReq?.signal ?? extra.signal;
  const options = { timeout, ...(signal === undefined ? {} : { signal }) };
  const own = (extra.mcpReq as Session | undefined)?.elicitInput;
  if (typeof own === 'function') return (params: unknown) => own(params, options);
  const elicitInput = sessionOf(server)?.elicitInput?.bind(sessionOf(server));
  const related = extra.requestId === undefined ? {} : { relatedRequestId: extra.requestId };
  return elicitInput && ((params: unknown) => elicitInput(params, { ...options, ...related }));
}

/**
 * How MCP asks the user about one call of an approval tool (undefined for other tools), for
 * core's `runAsking`: the answer the client's retry carries (2026-07-28), else an elicitation
 * (push-style, or an `input_required` round); a client that cannot be asked a `ConfigurationError`.
 */
export function askOf(
  approval: kit.AskingApproval<ToolCallInfo> | undefined,
  server: McpServerLike,
  info: ToolCallInfo,
): AskApproval | undefined {
  if (approval === undefined) return undefined;
  const { extra, toolName } = info;
  const envelope = extra.mcpReq?.envelope;
  const modern = envelope?.['io.modelcontextprotocol/protocolVersion'] !== undefined;
  const responses = (extra.mcpReq as { inputResponses?: Record<string, unknown> })?.inputResponses;
  const elicit = modern ? undefined : pushElicitation(server, extra, approval.timeout);
  const params = (message: string) => ({
    message,
    requestedSchema: { type: 'object', properties: {} },
  });
  return kit.askByQuestion(approval, info, {
    answered: (key) => responses?.[`${APPROVAL_INPUT_PREFIX}${key}`],
    canAsk:
      takesForm(
        modern
          ? (envelope?.['io.modelcontextprotocol/clientCapabilities'] as Capabilities)
          : sessionOf(server)?.getClientCapabilities?.(),
      ) &&
      (modern || elicit !== undefined),
    push: elicit && ((message) => elicit(params(message))),
    round: (key, message) => {
      const question = {
        method: 'elicitation/create',
        params: { mode: 'form', ...params(message) },
      };
      return {
        resultType: 'input_required',
        inputRequests: { [`${APPROVAL_INPUT_PREFIX}${key}`]: question },
      };
    },
    accepted: (answer) => {
      const action = (answer as { action?: unknown } | undefined)?.action;
      return action === 'accept' ? true : action === 'decline' ? false : undefined;
    },
    refuse: () =>
      new ConfigurationError({
        option: 'approval',
        message: `${toolName} needs the user's approval before it runs, and this MCP client cannot be asked (it did not declare the elicitation capability on this connection, or a stateless server never saw its capabilities). Nothing ran. Tell the user to approve it from a client that supports elicitation; do not retry from this one.`,
      }),
  });
}
