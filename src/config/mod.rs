//! The daemon's configuration: TOML in, validated typed data out.
//!
//! Parse (serde, unknown keys are errors), then validate (values that parse but make no sense),
//! then build (the daemon turns it into sources, stages and sinks). Errors name the key and the
//! line. Stages and sinks are closed sets of typed configs (`type = "..."`), so a typo is an
//! error at load time, never a silently ignored section. Every field's doc comment is its
//! reference documentation; `config/transcriptd.toml` shows them all, commented.
//!
//! `model` is the file as written, `setting` the typed settings in it, `check` the reader that
//! reports every error with its line, `resolve` the validation and what the daemon is built
//! from, `paths` the paths and patterns in it; `tools` the tool registry.

mod check;
mod model;
mod paths;
mod resolve;
mod setting;
pub mod tools;

pub use check::{ConfigError, ConfigErrors};
pub use model::{
    Config, DaemonConfig, Needs, ReadFrom, RepairMode, RepairRequest, SinkConfig, SinkContext, SinkNeeds, SourceConfig, SourceKind, StageConfig, WatchMode,
};
pub use paths::{default_user_state_dir, expand_home, literal_root};
pub use resolve::{MetricsSettings, Place, Resolved};
pub use setting::{parse_size, ByteSize, Parsed, Setting};

#[cfg(test)]
mod tests {
    use super::model::default_grace;
    use super::*;
    use crate::transcript::repair::OrphanPolicy;
    use std::time::Duration;

    const SHIPPED: &str = include_str!("../../config/transcriptd.toml");

    #[test]
    fn shipped_config_is_valid() {
        let c = Config::parse(SHIPPED, "config/transcriptd.toml").unwrap();
        c.validate("config/transcriptd.toml").unwrap();
    }

    #[test]
    fn unknown_keys_are_errors_naming_key_and_line() {
        let text = "[daemon]\nstate_dir = \"/tmp/x\"\nbogus = 1\n\n[[sources]]\ninclude = [\"/x/*.jsonl\"]\n";
        let e = Config::parse(text, "t.toml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.toml:3:"), "{msg}");
        assert!(msg.contains("bogus"), "{msg}");
    }

    #[test]
    fn stages_and_sinks_are_closed_sets() {
        let text = "[[sources]]\ninclude=[\"/x/*.jsonl\"]\n[[stages]]\ntype = \"parse\"\n[[stages]]\ntype = \"frobnicate\"\n";
        let e = Config::parse(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("t.toml:6") && e.contains("frobnicate"), "{e}");
        let text = "[[sources]]\ninclude=[\"/x/*.jsonl\"]\n[[sinks]]\ntype = \"prometheus\"\nadress = \"x\"\n";
        let e = Config::parse(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("adress"), "{e}");
    }

    #[test]
    fn values_are_validated() {
        let bad = |text: &str, key: &str| {
            let e = Config::parse(text, "t.toml").unwrap().validate("t.toml").unwrap_err().to_string();
            assert!(e.contains(key), "{e} should name {key}");
        };
        bad("[[sources]]\ninclude=[\"/x/*.jsonl\"]\nformat=\"cobol\"\n", "sources[0].format");
        bad("[[sources]]\ninclude=[]\n", "sources[0].include");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"prometheus\"\naddress=\"nowhere\"\n", "sinks[0].address");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"validate\"\n", "stages[0]");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"repair\"\n", "repaired_files");
        bad("[daemon]\nmax_line_bytes=\"lots\"\n[[sources]]\ninclude=[\"/x\"]\n", "daemon.max_line_bytes");
        bad("sources = []\n", "sources");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"repair\"\nmode=\"plan\"\norphans=\"maybe\"\n", "stages[1].orphans");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"http\"\nurl=\"https://x/\"\n", "sinks[0]");
        bad("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"http\"\nurl=\"http://x/\"\nmax_bytes=\"lots\"\n", "max_bytes");
    }

    #[test]
    fn stages_say_what_they_need_of_the_shell() {
        let text = "[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"compaction\"\n[[stages]]\ntype=\"orphans\"\ngrace=\"5s\"\nregistry=\"/r/tools.toml\"\n[[stages]]\ntype=\"validate\"\n[[stages]]\ntype=\"repair\"\nmode=\"plan\"\norphans=\"drop\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        for pure in [0, 1, 3] {
            assert_eq!(c.stages[pure].needs(), Needs::default(), "{:?}", c.stages[pure]);
        }
        let orphans = Needs { paused_calls: true, registry: Some("/r/tools.toml".into()), repair: None, quiet: Some(Duration::from_secs(5)) };
        assert_eq!(c.stages[2].needs(), orphans);
        let repair = RepairRequest { mode: RepairMode::Plan, orphans: OrphanPolicy::Drop };
        assert_eq!(c.stages[4].needs(), Needs { repair: Some(repair), ..Needs::default() });
        assert_eq!(c.needs(), Needs { repair: Some(repair), ..orphans });
        assert_eq!(c.quiet(), Duration::from_secs(5));
        // Repair's defaults; no `orphans` stage: nothing paused is read, the default grace is the
        // quiet time.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"repair\"\n", "t.toml").unwrap();
        assert_eq!(c.needs(), Needs { repair: Some(RepairRequest { mode: RepairMode::Copy, orphans: OrphanPolicy::Answer }), ..Needs::default() });
        assert_eq!(c.quiet(), default_grace());
        // The quiet period reads no setting: it holds before validation.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[stages]]\ntype=\"parse\"\n[[stages]]\ntype=\"orphans\"\ngrace=\"7s\"\n[[stages]]\ntype=\"repair\"\nmode=\"plan\"\norphans=\"maybe\"\n", "t.toml").unwrap();
        assert_eq!(c.quiet(), Duration::from_secs(7));
        assert_eq!((c.stages[1].quiet(), c.stages[2].quiet()), (Some(Duration::from_secs(7)), None));
        // The shipped defaults: the orphans stage's.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n", "t.toml").unwrap();
        assert_eq!(c.needs(), Needs { paused_calls: true, quiet: Some(default_grace()), ..Needs::default() });
    }

    #[test]
    fn sinks_say_what_they_need_of_the_shell() {
        let text = "[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"stdout\"\n[[sinks]]\ntype=\"file\"\npath=\"/o/out.jsonl\"\n[[sinks]]\ntype=\"repaired_files\"\ndir=\"/o/repaired\"\n[[sinks]]\ntype=\"prometheus\"\n[[sinks]]\ntype=\"http\"\nurl=\"http://x/\"\n";
        let c = Config::parse(text, "t.toml").unwrap();
        let needs: Vec<SinkNeeds> = c.sinks.iter().map(SinkConfig::needs).collect();
        assert_eq!(needs[1], SinkNeeds { dirs: vec!["/o".into()], appends_to: Some("/o/out.jsonl".into()), repairs_into: None, bytes: false });
        assert_eq!(needs[2], SinkNeeds { dirs: vec!["/o/repaired".into()], appends_to: None, repairs_into: Some("/o/repaired".into()), bytes: false });
        for plain in [0, 3, 4] {
            assert_eq!(needs[plain], SinkNeeds::default(), "{:?}", c.sinks[plain]);
        }
        // The snapshot sink: its directory, and every byte read.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"snapshot\"\ndir=\"/o/snap\"\nmax_age=\"90d\"\nmax_bytes=\"1GiB\"\n", "t.toml")
            .unwrap();
        assert_eq!(c.sinks[0].needs(), SinkNeeds { dirs: vec!["/o/snap".into()], bytes: true, ..SinkNeeds::default() });
        // A file named without a directory needs none made.
        let c = Config::parse("[[sources]]\ninclude=[\"/x\"]\n[[sinks]]\ntype=\"file\"\npath=\"out.jsonl\"\n", "t.toml").unwrap();
        assert_eq!(c.sinks[0].needs(), SinkNeeds { appends_to: Some("out.jsonl".into()), ..SinkNeeds::default() });
    }
}
