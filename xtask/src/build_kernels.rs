pub fn run(_json: bool, _jobs: usize) -> anyhow::Result<bool> {
    todo!()
}
