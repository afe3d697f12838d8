// A notification with its content erased: what the engine keeps of it once its user is erased.

extension SubmittedNotification {
    /// The notification without its content (title, subtitle, body, placeholder, data, actions; a
    /// communication's sender replaced by its digest, its group dropped): the same value a
    /// sealed submit body decodes to once its key is gone (`ContentSeal`), so an erased user's
    /// pending notifications decide alike live and in replay.
    public func erased() -> SubmittedNotification {
        let f = storage.fields
        var e = Fields(id: f.id, app: f.app, level: f.level)
        e.threadId = f.threadId
        e.collapseId = f.collapseId
        e.relevanceScore = f.relevanceScore
        e.sound = f.sound
        e.marketing = f.marketing
        e.deliverAt = f.deliverAt
        e.expiresAt = f.expiresAt
        e.relevantAt = f.relevantAt
        e.communication = f.communication.map { c in
            c.sender.hasPrefix(ContentSeal.senderDigestPrefix) && c.group == nil
                ? c : CommunicationInfo(sender: ContentSeal.senderDigestPrefix + ContentSeal.senderDigest(c.sender))
        }
        return SubmittedNotification(storage: Storage(e))
    }

    /// Whether a Focus allowing `allowedPeople` lets this notification's sender through: by name,
    /// or, for an erased notification, by the digest of a name.
    func senderAllowed(by allowedPeople: [String]) -> Bool {
        guard let sender = communication?.sender else { return false }
        if allowedPeople.contains(sender) { return true }
        guard sender.hasPrefix(ContentSeal.senderDigestPrefix) else { return false }
        let digest = sender.dropFirst(ContentSeal.senderDigestPrefix.count)
        return allowedPeople.contains { ContentSeal.senderDigest($0) == digest }
    }
}
