//go:build rancher

package rancher

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// login logs in on Rancher's login page as the admin.
func login(t *testing.T, b *browser) {
	t.Helper()
	b.step("log in", func() error {
		if err := b.open("/dashboard/auth/login"); err != nil {
			return err
		}
		// A page loaded while Rancher was still starting may lack its form:
		// loaded again, as a person would, it has it.
		for range 3 {
			ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
			err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`input[data-testid="local-login-username"]`)))
			cancel()
			if err == nil {
				break
			}
			if err := b.run(chromedp.Reload()); err != nil {
				return err
			}
		}
		// Rancher answers before the admin's password is stored: a login
		// refused in that moment is tried again, as a person would.
		var refused string
		for range 4 {
			if err := b.typeInto(`input[data-testid="local-login-username"]`, adminUser); err != nil {
				return err
			}
			if err := b.typeInto(`[data-testid="local-login-password"] input`, adminPassword); err != nil {
				return err
			}
			if err := b.click(`button[data-testid="login-submit"]`); err != nil {
				return err
			}
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				loc, _ := eval[string](b, `location.pathname`)
				if loc != "" && !strings.Contains(loc, "/auth/login") {
					return nil
				}
				time.Sleep(500 * time.Millisecond)
			}
			refused, _ = eval[string](b, `(document.querySelector('[data-testid="login__messages"]') || {}).innerText || ""`)
			b.t.Logf("log in: still on the login page (%q); again", refused)
		}
		return fmt.Errorf("still on the login page: %q", refused)
	})
}
