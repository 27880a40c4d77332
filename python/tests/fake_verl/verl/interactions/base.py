"""STAND-IN for verl.interactions.base (test-only): BaseInteraction's constructor and methods."""

from typing import Any, Dict, List, Optional
from uuid import uuid4


class BaseInteraction:
    def __init__(self, config: Dict[str, Any]):
        self.config = config
        self.name: str = config.get("name", "interaction_agent")

    async def start_interaction(self, instance_id: Optional[str] = None, **kwargs) -> str:
        return instance_id or str(uuid4())

    async def generate_response(self, instance_id: str, messages: List[Dict[str, Any]], **kwargs) -> tuple:
        return False, "Your current result seems acceptable.", 0.8, {}

    async def calculate_score(self) -> float:
        return 0.0

    async def finalize_interaction(self) -> None:
        pass
