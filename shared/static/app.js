// nib's web app: small enhancements only; every screen works without this script.
'use strict';

// The copy button beside a token shown once.
document.querySelectorAll('button.copy[data-copy]').forEach((button) => {
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  button.hidden = false;
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      button.textContent = 'Copied';
    } catch (e) {
      button.textContent = 'Select and copy it';
    }
  });
});
