// lossless explorer: sign-in (the token goes to /ui/session as JSON, then lives in an HttpOnly cookie)
// and two keys: "/" focuses the search box, "j"/"k" move between messages of a conversation.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("login");
  if (form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const token = document.getElementById("token").value;
      const answer = await fetch("/ui/session", {
        method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({token}),
      });
      if (answer.ok) { window.location.assign("/ui/"); }
      else { document.getElementById("login-error").textContent = await answer.text(); }
    });
  }
  const messages = Array.from(document.querySelectorAll("article.msg"));
  let at = -1;
  document.addEventListener("keydown", (event) => {
    const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (event.key === "/") {
      const search = document.querySelector("input[name=q]");
      if (search) { event.preventDefault(); search.focus(); }
    } else if ((event.key === "j" || event.key === "k") && messages.length) {
      at = Math.max(0, Math.min(messages.length - 1, at + (event.key === "j" ? 1 : -1)));
      messages[at].focus();
    }
  });
});
