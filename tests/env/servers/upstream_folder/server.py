"""A tiny upstream-style environment folder: written with upstream's protocol SDK, served on
MCP_HOST / MCP_PORT (the test runs it with .venv-upstream's python). It keeps no data, but
answers the data plane (data/reset, data/get) as an environment with data would."""

from agentenv_protocol import AgentEnvEnvironment, environment_card, tool
from agentenv_protocol.agent_env_environment import get_data, reset_data


@environment_card(name="upstream-folder")
class FolderEnv(AgentEnvEnvironment):
    @tool(name="reverse")
    def reverse(self, text: str) -> str:
        """Return the text backwards."""
        return text[::-1]

    @reset_data
    def forget(self) -> None:
        """Nothing to forget."""

    @get_data
    def export(self) -> list:
        """No data parts."""
        return []


if __name__ == "__main__":
    FolderEnv().serve()
