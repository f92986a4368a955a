"""A tiny environment written with upstream's protocol SDK (run with .venv-upstream's
python; MCP_HOST / MCP_PORT pick the address)."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool


@environment_card(name="tiny")
class TinyEnv(AgentEnvEnvironment):
    @tool(name="shout")
    def shout(self, text: str) -> str:
        """Return the text in capitals."""
        return text.upper()


if __name__ == "__main__":
    TinyEnv().serve()
