// Wiggle's language server in VS Code: starts `wiggle lsp` (docs/editors.md) for the YAML and
// JSON files of the workspace; the server itself decides which of them are flows, scenario files
// or schedules and leaves the others alone. Everything the server offers (diagnostics,
// completion, hover, definition, references, outline, code lens) comes through the standard
// client; this file only adds what VS Code must do itself with a command's answer: show the
// flow's picture, and copy its version.
import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;

interface Picture {
  svg?: string;
  name?: string;
  version?: string;
  error?: string;
}

function settings(): Record<string, unknown> {
  const config = vscode.workspace.getConfiguration("wiggle");
  return {
    address: config.get<string>("address") || undefined,
    tokenFile: config.get<string>("tokenFile") || undefined,
    debounceMs: config.get<number>("debounceMs"),
    unregisteredActivities: config.get<boolean>("unregisteredActivities"),
  };
}

function serverCommand(): [string, string[]] {
  const configured = vscode.workspace.getConfiguration("wiggle").get<string[]>("command");
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? "";
  const parts = (configured && configured.length > 0 ? configured : ["wiggle", "lsp"]).map((p) =>
    p.replace("${workspaceFolder}", folder),
  );
  return [parts[0], parts.slice(1)];
}

function showPicture(picture: Picture): void {
  if (picture.error || !picture.svg) {
    void vscode.window.showWarningMessage(`Wiggle: no picture: ${picture.error ?? "empty"}`);
    return;
  }
  const panel = vscode.window.createWebviewPanel(
    "wigglePicture",
    `${picture.name ?? "flow"} (${(picture.version ?? "").slice(0, 19)})`,
    vscode.ViewColumn.Beside,
    { enableScripts: false },
  );
  panel.webview.html = `<!DOCTYPE html><html><body style="background:white">${picture.svg}</body></html>`;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const [command, args] = serverCommand();
  const serverOptions: ServerOptions = { command, args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "yaml" },
      { scheme: "file", language: "json" },
    ],
    initializationOptions: settings(),
    synchronize: { configurationSection: "wiggle" },
    middleware: {
      // The server's commands answer with data; VS Code shows it.
      executeCommand: async (name, commandArgs, next) => {
        const answer = await next(name, commandArgs);
        if (name === "wiggle.render") {
          showPicture(answer as Picture);
        } else if (name === "wiggle.version" && answer?.version) {
          await vscode.env.clipboard.writeText(answer.version);
          void vscode.window.showInformationMessage(`${answer.name} ${answer.version} (copied)`);
        }
        return answer;
      },
    },
  };
  client = new LanguageClient("wiggle", "Wiggle", serverOptions, clientOptions);
  context.subscriptions.push(
    vscode.commands.registerCommand("wiggle.showPicture", async () => {
      const editor = vscode.window.activeTextEditor;
      if (client && editor) {
        const uri = editor.document.uri.toString();
        showPicture(await client.sendRequest<Picture>("wiggle/render", { uri }));
      }
    }),
  );
  await client.start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
