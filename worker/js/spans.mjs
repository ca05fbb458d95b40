// A run's model calls and tool calls as spans the worker exports under the run's own (as the
// Python runner's `spans.py`): each hangs under the nearest of them that encloses it, whatever
// chains lie between. Made from the project's own `BaseCallbackHandler`.

export function spansClass(BaseCallbackHandler) {
  return class Spans extends BaseCallbackHandler {
    name = "mostrador_spans";
    // In order, as they happen: a span's end never reaches the worker before its start.
    awaitHandlers = true;

    constructor(channel) {
      super();
      this.channel = channel;
      this.parents = new Map();
      this.open = new Set();
    }

    enclosing(parent) {
      while (parent != null && !this.open.has(parent)) parent = this.parents.get(parent);
      return parent ?? null;
    }

    start(runId, parent, name, kind, attributes = {}) {
      this.parents.set(runId, parent);
      this.open.add(runId);
      this.channel.cast("span", { phase: "start", id: runId, parent: this.enclosing(parent), name, kind, ...attributes });
    }

    end(runId, error) {
      this.parents.delete(runId);
      if (!this.open.delete(runId)) return;
      this.channel.cast("span", { phase: "end", id: runId, error: error == null ? null : `${error.name}: ${error.message}` });
    }

    handleChainStart(chain, inputs, runId, runType, tags, metadata, runName, parentRunId) {
      this.parents.set(runId, parentRunId);
    }

    handleChainEnd(outputs, runId) {
      this.parents.delete(runId);
    }

    handleChainError(err, runId) {
      this.parents.delete(runId);
    }

    handleChatModelStart(llm, messages, runId, parentRunId, extraParams, tags, metadata) {
      const params = extraParams?.invocation_params ?? {};
      const model = params.model ?? params.modelName ?? params.model_name ?? metadata?.ls_model_name ?? "";
      this.start(runId, parentRunId, "model call", "model", { model: String(model) });
    }

    handleLLMStart(llm, prompts, runId, parentRunId) {
      this.start(runId, parentRunId, "model call", "model");
    }

    handleLLMEnd(output, runId) {
      this.end(runId);
    }

    handleLLMError(err, runId) {
      this.end(runId, err);
    }

    handleToolStart(tool, input, runId, parentRunId, tags, metadata, runName) {
      this.start(runId, parentRunId, "tool call", "tool", { tool: String(runName ?? tool?.name ?? "") });
    }

    handleToolEnd(output, runId) {
      this.end(runId);
    }

    handleToolError(err, runId) {
      this.end(runId, err);
    }
  };
}
