// A chat model for tests, as LangGraph.js's own tests fake one: it asks for the weather tool
// once, then answers with what the tool said. It decides from the conversation alone, so every
// server (and every process of one) answers alike.
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";

export class FakeWeatherModel extends BaseChatModel {
  _llmType() {
    return "fake-weather";
  }

  bindTools() {
    return this;
  }

  private reply(messages: BaseMessage[]): AIMessage {
    const last = messages[messages.length - 1];
    if (last._getType() === "tool") {
      return new AIMessage({ id: "answer", content: `The weather: ${last.content}` });
    }
    return new AIMessage({
      id: "ask-tool",
      content: "",
      tool_calls: [{ id: "call-1", name: "get_weather", args: { city: "Paris" }, type: "tool_call" }],
    });
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const message = this.reply(messages);
    return { generations: [{ text: String(message.content), message }] };
  }

  async *_streamResponseChunks(messages: BaseMessage[]) {
    const message = this.reply(messages);
    const words = String(message.content).split(/(?<= )/);
    for (const [i, word] of (words.length ? words : [""]).entries()) {
      const chunk = new AIMessageChunk({
        id: message.id,
        content: word,
        tool_call_chunks:
          i === 0
            ? (message.tool_calls ?? []).map((call, index) => ({
                id: call.id,
                name: call.name,
                args: JSON.stringify(call.args),
                index,
              }))
            : [],
      });
      yield new ChatGenerationChunk({ text: word, message: chunk });
    }
  }
}
