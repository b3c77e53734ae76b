//! What keeps the browser, which runs the open web's code, away from the
//! worker's secrets (`SESSION_KEY`, the store passwords in `DATABASE_URL` and
//! `REDIS_URL`, the sealed sites' keys):
//!
//! - Chrome starts with an environment of its own: a handful of variables it
//!   needs, none of the worker's.
//! - Chrome runs with its sandbox (renderers in namespaces of their own, with
//!   a seccomp filter) wherever the platform allows it. Chrome refuses its
//!   sandbox as root, so a worker running as root starts Chrome as another
//!   user (`CHROME_USER`, `nobody` by default). Where the sandbox cannot be
//!   had (a container whose seccomp profile forbids user namespaces, as
//!   Docker's and Fargate's default do), `CHROME_SANDBOX=auto` starts Chrome
//!   without it and says so once in the log.
//! - The worker makes itself non-dumpable ([`protect_worker`]): its
//!   `/proc/<pid>/environ` and memory then belong to root, so a browser of the
//!   same user (the containers' case) cannot read them, nor trace it.

use std::{ffi::CString, path::Path};

use anyhow::{Context, bail};

/// The user Chrome runs as, when not the worker's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChromeUser {
    pub uid: u32,
    pub gid: u32,
}

/// The user a worker running as root starts Chrome as, when none is named.
const ROOT_DEFAULT_USER: &str = "nobody";

impl ChromeUser {
    /// The user named by `CHROME_USER` (a name, `uid` or `uid:gid`), or, for a
    /// worker running as root, `nobody`; none when Chrome runs as the worker.
    pub fn resolve(setting: Option<&str>) -> anyhow::Result<Option<ChromeUser>> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let name = match setting.map(str::trim).filter(|s| !s.is_empty()) {
            Some(name) => name,
            None if root => ROOT_DEFAULT_USER,
            None => return Ok(None),
        };
        let user = Self::parse(name)?;
        // SAFETY: as above.
        if !root && user.uid != unsafe { libc::geteuid() } {
            bail!(
                "CHROME_USER={name}: only a worker running as root can start Chrome as another user"
            );
        }
        if user.uid == 0 {
            bail!("CHROME_USER={name}: Chrome must not run as root");
        }
        Ok(Some(user))
    }

    fn parse(name: &str) -> anyhow::Result<ChromeUser> {
        if let Some((uid, gid)) = name.split_once(':') {
            return Ok(ChromeUser {
                uid: uid.parse().context("CHROME_USER: a uid:gid of numbers")?,
                gid: gid.parse().context("CHROME_USER: a uid:gid of numbers")?,
            });
        }
        if let Ok(uid) = name.parse::<u32>() {
            return Ok(ChromeUser { uid, gid: uid });
        }
        let c_name = CString::new(name).context("CHROME_USER: a user name")?;
        // SAFETY: getpwnam_r writes into the buffers it is given, of the sizes given.
        unsafe {
            let mut entry: libc::passwd = std::mem::zeroed();
            let mut buffer = vec![0 as libc::c_char; 4096];
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            let status = libc::getpwnam_r(
                c_name.as_ptr(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            );
            if status != 0 || found.is_null() {
                bail!("CHROME_USER={name}: no such user on this machine");
            }
            Ok(ChromeUser {
                uid: entry.pw_uid,
                gid: entry.pw_gid,
            })
        }
    }

    /// Gives `dir` and everything under it to this user (Chrome writes its
    /// profile, temporary files and crash database there).
    pub fn take_over(&self, dir: &Path) -> anyhow::Result<()> {
        std::os::unix::fs::lchown(dir, Some(self.uid), Some(self.gid))
            .with_context(|| format!("giving {} to Chrome's user", dir.display()))?;
        if dir.is_dir() && !dir.is_symlink() {
            for entry in
                std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?
            {
                self.take_over(&entry?.path())?;
            }
        }
        Ok(())
    }

    /// In the forked child, before exec: becomes this user for good (no
    /// supplementary groups kept). Only async-signal-safe calls.
    pub fn become_in_child(&self) -> std::io::Result<()> {
        // SAFETY: setgroups, setgid and setuid are plain system calls.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(self.gid) != 0
                || libc::setuid(self.uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The variables Chrome is started with, besides its own places (`TMPDIR`,
/// `XDG_CONFIG_HOME`, `HOME`): only these are taken from the worker's
/// environment, which holds secrets.
const PASSED_TO_CHROME: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "TZ",
    "FONTCONFIG_PATH",
    "FONTCONFIG_FILE",
];

/// The worker's variables Chrome may see (see [`PASSED_TO_CHROME`]).
pub fn passed_to_chrome() -> impl Iterator<Item = (&'static str, std::ffi::OsString)> {
    PASSED_TO_CHROME
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (*name, value)))
}

/// Makes this process non-dumpable: its `/proc/<pid>/` files (environ, mem,
/// maps) belong to root from now on, and no process of the same user may
/// trace it. Chrome gets the default back when it execs.
pub fn protect_worker() -> bool {
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_named_by_name_uid_or_uid_and_gid() {
        assert_eq!(
            ChromeUser::parse("65534").unwrap(),
            ChromeUser {
                uid: 65534,
                gid: 65534
            }
        );
        assert_eq!(
            ChromeUser::parse("10001:10002").unwrap(),
            ChromeUser {
                uid: 10001,
                gid: 10002
            }
        );
        assert_eq!(ChromeUser::parse("root").unwrap().uid, 0);
        assert!(ChromeUser::parse("no-such-user-here").is_err());
        assert!(ChromeUser::parse("1:x").is_err());
    }

    #[test]
    fn chrome_is_handed_no_secret_of_the_worker() {
        let names: Vec<&str> = PASSED_TO_CHROME.to_vec();
        for secret in [
            "SESSION_KEY",
            "DATABASE_URL",
            "REDIS_URL",
            "API_TOKENS",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(
                !names.contains(&secret),
                "{secret} must stay with the worker"
            );
        }
    }
}
