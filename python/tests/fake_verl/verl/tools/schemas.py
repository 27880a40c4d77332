"""STAND-IN for verl.tools.schemas (test-only): the attribute shape of verl's pydantic models
(``schema.function.name``; ``ToolResponse(text=...)``), without pydantic."""

from typing import Any, Dict, List, Optional


class _Obj:
    def __init__(self, data: Dict[str, Any]):
        for k, v in data.items():
            setattr(self, k, _Obj(v) if isinstance(v, dict) else v)
        self._data = data

    def model_dump(self, **kwargs) -> Dict[str, Any]:
        return self._data


class OpenAIFunctionToolSchema(_Obj):
    """``{"type": "function", "function": {"name", "description", "parameters"}}``."""

    @classmethod
    def model_validate(cls, data: Dict[str, Any]) -> "OpenAIFunctionToolSchema":
        if data.get("type") != "function" or not isinstance(data.get("function"), dict):
            raise ValueError("tool schema must be {type: function, function: {...}}")
        function = data["function"]
        for key in ("name", "description"):
            if not isinstance(function.get(key), str):
                raise ValueError(f"function.{key} must be a string")
        params = function.get("parameters", {"type": "object", "properties": {}, "required": []})
        if not isinstance(params.get("properties"), dict) or not isinstance(params.get("required", []), list):
            raise ValueError("function.parameters needs properties (dict) and required (list)")
        for name, prop in params["properties"].items():
            if not isinstance(prop.get("type"), str):
                raise ValueError(f"property {name} needs a string type (verl's schema requires it)")
        return cls(data)


class ToolResponse:
    """``ToolResponse(text=None, image=None, video=None)``."""

    def __init__(
        self,
        text: Optional[str] = None,
        image: Optional[List[Any]] = None,
        video: Optional[List[Any]] = None,
    ):
        self.text, self.image, self.video = text, image, video
