"""A tiny upstream-style environment folder: written with upstream's protocol SDK, served on
MCP_HOST / MCP_PORT (the test runs it with .venv-upstream's python). It keeps no data, but
answers the data plane (data/reset, data/get) as an environment with data would, and takes
the gateway's virtual clock the way upstream's servers do (the clock extension's sync_time,
then GET env_get_time_url)."""

import httpx
from agentenv_protocol import AgentEnvEnvironment, environment_card, extension, tool
from agentenv_protocol.agent_env_environment import get_data, reset_data


@environment_card(name="upstream-folder")
class FolderEnv(AgentEnvEnvironment):
    env_get_time_url = None

    @tool(name="reverse")
    def reverse(self, text: str) -> str:
        """Return the text backwards."""
        return text[::-1]

    @tool(name="what_time")
    def what_time(self) -> str:
        """The time this server believes it is: the gateway's virtual time once synced."""
        if self.env_get_time_url is None:
            return "wall clock"
        return httpx.get(self.env_get_time_url, timeout=10).json()["virtual_time"]

    @extension(uri="urn:agentenv:clock/v1", description="Follow the gateway's virtual clock.")
    async def sync_time(self, env_get_time_url: str) -> dict:
        """Keep the URL to read the gateway's virtual time from."""
        self.env_get_time_url = env_get_time_url
        async with httpx.AsyncClient() as client:
            answer = await client.get(env_get_time_url, timeout=10)
            answer.raise_for_status()
        return {"gateway_virtual_time": answer.json()["virtual_time"]}

    @reset_data
    def forget(self) -> None:
        """Nothing to forget."""

    @get_data
    def export(self) -> list:
        """No data parts."""
        return []


if __name__ == "__main__":
    FolderEnv().serve()
