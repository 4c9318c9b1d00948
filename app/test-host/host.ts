// A minimal MCP Apps host for the browser tests: an MCP client (the official TS client) whose
// messages the test relays to `ipykeep mcp-serve`, and an ext-apps `AppBridge` that renders the
// `ui://` resource of a linked tool in a sandboxed iframe and forwards the view's tool calls.
import { Client } from "@modelcontextprotocol/client";
import type { CallToolResult, JSONRPCMessage, Tool } from "@modelcontextprotocol/core";
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
} from "@modelcontextprotocol/ext-apps/app-bridge";

declare global {
  interface Window {
    relayOut(message: string): Promise<void>;
    relayIn(message: string): void;
    host: Host;
  }
}

/** The client side of a stdio pipe the test holds: each message a JSON line. */
class RelayTransport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  async start(): Promise<void> {
    window.relayIn = (line: string) => this.onmessage?.(JSON.parse(line) as JSONRPCMessage);
  }
  async send(message: JSONRPCMessage): Promise<void> {
    await window.relayOut(JSON.stringify(message));
  }
  async close(): Promise<void> {
    this.onclose?.();
  }
}

class Host {
  client: Client;
  tools: Tool[] = [];
  bridge: AppBridge | null = null;
  calls: Promise<CallToolResult>[] = [];

  constructor() {
    this.client = new Client(
      { name: "ipykeep-test-host", version: "1.0.0" },
      { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } } },
    );
  }

  async connect(): Promise<string[]> {
    await this.client.connect(new RelayTransport());
    this.tools = (await this.client.listTools()).tools;
    return this.tools.map((t) => t.name);
  }

  /** Render the view of the tool `name` links, then call it as the model would. */
  async call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
    const tool = this.tools.find((t) => t.name === name);
    const uri = tool ? getToolUiResourceUri(tool) : undefined;
    if (!uri) throw new Error(`${name} links no view`);
    const read = await this.client.readResource({ uri });
    const content = read.contents[0] as { text?: string; mimeType?: string };
    if (content.mimeType !== RESOURCE_MIME_TYPE || !content.text) throw new Error("not an app resource");
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "allow-scripts");
    document.getElementById("frame")!.replaceChildren(frame);
    const bridge = new AppBridge(
      this.client,
      { name: "ipykeep-test-host", version: "1.0.0" },
      { serverTools: {}, logging: {} },
    );
    this.bridge = bridge;
    bridge.onsizechange = ({ height }) => {
      if (height) frame.style.height = `${Math.min(Math.max(height, 200), 2000)}px`;
    };
    const ready = new Promise<void>((resolve) => (bridge.oninitialized = () => resolve()));
    await bridge.connect(new PostMessageTransport(frame.contentWindow!, frame.contentWindow!));
    frame.srcdoc = content.text;
    await ready;
    await bridge.sendToolInput({ arguments: args });
    const result = (await this.client.callTool({ name, arguments: args })) as CallToolResult;
    await bridge.sendToolResult(result);
    return result;
  }
}

window.host = new Host();
