// The prebuilt ReAct agent, as LangGraph.js's quickstart builds it.
import { tool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import { FakeWeatherModel } from "./model.js";

const getWeather = tool(async ({ city }) => `sunny in ${city}`, {
  name: "get_weather",
  description: "The weather in a city.",
  schema: z.object({ city: z.string() }),
});

export const graph = createReactAgent({ llm: new FakeWeatherModel({}), tools: [getWeather] });
