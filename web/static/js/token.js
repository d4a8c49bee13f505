// The API token (PTMLAB_API_TOKEN) for mutating requests, kept in this browser only.
import { setToken, token } from "/static/js/api.js";

const button = document.getElementById("token-button");
if (button) {
  const label = () => { button.textContent = token() ? "API token ✓" : "API token"; };
  label();
  button.addEventListener("click", () => {
    const value = window.prompt("Bearer token for submitting, cancelling and retrying (empty: none)", token());
    if (value !== null) setToken(value.trim());
    label();
  });
}
